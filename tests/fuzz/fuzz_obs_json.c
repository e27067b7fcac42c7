/*
 * fuzz_obs_json.c - libFuzzer harness of the observation-file loader of
 * `ccol dyn merge` (tools/obs_json.c, included here because the tools are
 * not a library): any bytes must either load or fail with a message; a
 * loaded file is folded as two ranks through the public lattice API, and
 * every source is rendered, its decisions listed and each one explained,
 * as the command does.
 */
#include "obs_json.c"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Renders, lists and explains every source; aborts on any failure (the
 * names come from the lattice itself, so they must explain). */
static void
read_back(ccol_dyn *d)
{
    size_t n;
    char *r, *names, *line;

    if (ccol_dyn_nsources(d, &n) != CCOL_OK)
        abort();
    for (size_t i = 0; i < n; i++) {
        const char *src = ccol_dyn_source(d, i);
        size_t sl = strlen(src);
        if (ccol_dyn_render(d, src, &r) != CCOL_OK ||
            ccol_dyn_dynamic(d, src, &names) != CCOL_OK)
            abort();
        for (char *p = names; *p != '\0';) {
            char *end = strchr(p + sl, '\n');
            if (end != NULL)
                *end = '\0';
            if (ccol_dyn_explain(d, p, &line) != CCOL_OK)
                abort();
            ccol_free(line);
            p = end != NULL ? end + 1 : p + strlen(p);
        }
        ccol_free(r);
        ccol_free(names);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tool_obs_file f;
    ccol_dyn *d;
    char err[512];

    err[0] = '\0';
    if (tool_obs_parse((const char *)data, size, "fuzz.json", &f, err,
                        sizeof err) != 0) {
        if (err[0] == '\0' || f.n != 0 || f.v != NULL)
            abort(); /* a failure must say why and leave nothing */
        return 0;
    }
    if (ccol_dyn_create(&d) != CCOL_OK)
        abort();
    /* The same file as ranks 0 and 1: every source must fold. */
    if (tool_obs_fold(&f, d, 0) != CCOL_OK ||
        tool_obs_fold(&f, d, 1) != CCOL_OK)
        abort();
    read_back(d);
    ccol_dyn_destroy(d);
    tool_obs_free(&f);
    return 0;
}
