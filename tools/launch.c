/*
 * launch.c - the environment of local ranks (launch.h).
 */
#include "launch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

/* True for a variable by which an outer launcher gives a rank its place. */
static bool
outer_rank_var(const char *entry)
{
    static const char *const names[] = {
        "PMI_RANK=", "PMI_SIZE=", "MPI_LOCALRANKID=", "MPI_LOCALNRANKS=",
        "SLURM_PROCID=", "SLURM_NTASKS=", "SLURM_LOCALID=",
        "SLURM_STEP_NUM_TASKS=",
    };

    if (strncmp(entry, "OMPI_COMM_WORLD_", 16) == 0)
        return true;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strncmp(entry, names[i], strlen(names[i])) == 0)
            return true;
    return false;
}

/* Removes the outer launchers' rank variables from the environment. */
static void
scrub_outer(void)
{
    char name[256];
    bool again = true;

    while (again) {
        again = false;
        for (char **e = environ; e != NULL && *e != NULL; e++) {
            const char *eq = strchr(*e, '=');
            size_t len = eq != NULL ? (size_t)(eq - *e) : strlen(*e);

            if (!outer_rank_var(*e) || len >= sizeof name)
                continue;
            memcpy(name, *e, len);
            name[len] = '\0';
            unsetenv(name); /* environ changed: rescan from the start */
            again = true;
            break;
        }
    }
}

static bool
setenv_int(const char *name, int v)
{
    char buf[32];

    snprintf(buf, sizeof buf, "%d", v);
    return setenv(name, buf, 1) == 0;
}

bool
tool_launch_env(const tool_launch *l)
{
    scrub_outer();
    /* shared memory only when every rank is on this host, and only when
     * the caller did not choose (CCOL_TRANSPORT=tcp keeps the sockets) */
    return (l->nnodes > 1 || setenv("CCOL_TRANSPORT", "shm", 0) == 0) &&
           setenv_int("WORLD_SIZE", l->nlocal * l->nnodes) &&
           setenv_int("LOCAL_WORLD_SIZE", l->nlocal) &&
           setenv("MASTER_ADDR", l->addr, 1) == 0 &&
           setenv_int("MASTER_PORT", l->port) &&
           setenv_int("GROUP_RANK", l->node_rank) &&
           setenv("CCOL_RUN", "1", 1) == 0;
}

bool
tool_launch_rank_env(const tool_launch *l, int local)
{
    return setenv_int("RANK", l->node_rank * l->nlocal + local) &&
           setenv_int("LOCAL_RANK", local);
}
