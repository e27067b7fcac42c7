/*
 * outcome.h - what every rank of a job that is meant to fail reported: its
 * status, its message and how long the call took. Shared by the comm tests
 * (memory from ccol_test_shared, so forked ranks fill it in too).
 */
#ifndef CCOL_TEST_OUTCOME_H
#define CCOL_TEST_OUTCOME_H

#include "harness.h"

#include <stdio.h>

typedef struct ccol_outcome {
    int status[8];     /* status each rank got */
    char msg[8][CCOL_ERRMSG_MAX]; /* message each rank got */
    double took[8];    /* seconds the call took */
} ccol_outcome;

/* Records rank's status st, its comm's message and the time since t0. */
static inline void
ccol_outcome_note(ccol_outcome *o, int rank, ccol_status st, ccol_comm *c,
                  double t0)
{
    o->status[rank] = st;
    snprintf(o->msg[rank], sizeof o->msg[rank], "%s", ccol_comm_errmsg(c));
    o->took[rank] = ccol_test_now() - t0;
}

#endif
