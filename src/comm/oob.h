/*
 * oob.h - the oob transport (oob.c): every operation over the caller's
 * non-blocking all-gather (ccol_oob), so a framework that already has a
 * communicator plugs in without point-to-point links.
 */
#ifndef CCOL_OOB_H
#define CCOL_OOB_H

#include "link.h"

/* Wraps the caller's table (checked complete by the caller). */
ccol_status ccol__oob_attach(const ccol__link_cfg *cfg, const ccol_oob *oob,
                             ccol__link **out, ccol__err *err);

#endif /* CCOL_OOB_H */
