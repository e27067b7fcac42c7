/*
 * fuzz_obs_json.c - libFuzzer harness of the observation-file loader of
 * `ccol dyn merge` (tools/obs_json.c, included here because the tools are
 * not a library): any bytes must either load or fail with a message; a
 * loaded file is folded, marked and rendered like the command does.
 */
#include "obs_json.c"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ccol__obs_file f;
    ccol__dyn_map m;
    ccol__buf b = { 0 };
    char err[512];

    err[0] = '\0';
    if (ccol__obs_parse((const char *)data, size, "fuzz.json", &f, err,
                        sizeof err) != 0) {
        if (err[0] == '\0' || f.n != 0 || f.v != NULL)
            abort(); /* a failure must say why and leave nothing */
        return 0;
    }
    ccol__dyn_map_init(&m);
    for (size_t i = 0; i < f.n; i++) {
        ccol__dyn_entry e = f.v[i].e;
        for (int d = 0; d < f.v[i].ndim; d++)
            if (f.v[i].marks >> d & 1)
                ccol__dyn_entry_mark_dynamic(&e, f.v[i].ndim, d);
        ccol__dyn_map_join_entry(&m, f.v[i].source, &e);
    }
    ccol__dyn_map_render(&m, &b);
    ccol__buf_free(&b);
    ccol__dyn_map_free(&m);
    ccol__obs_free(&f);
    return 0;
}
