/*
 * fuzz_profile_file.c - libFuzzer harness of the profile file of `ccol jit
 * --profile` (tools/profile_file.c): any bytes give the document inside or
 * a reason, never a crash; a header that checks out holds exactly the
 * bytes it announces; and a document libccol loads (ccol_sync_profile_load
 * on a fresh sync) saves and re-encodes, header and all, to the very bytes
 * of the file (both formats are canonical). ccol_sync_profile_check must
 * agree with the load.
 *
 * The replay build links only libccol and jansson, so the reader is
 * compiled into this harness directly.
 */
#include "profile_file.c"

#include "ccol.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A loaded document must come back as the same file. */
static void
round_trip(ccol_sync *s, const uint8_t *data, size_t size)
{
    void *saved = NULL;
    uint8_t *file;
    size_t n = 0, fn = 0;

    if (ccol_sync_profile_save(s, &saved, &n) != CCOL_OK)
        return; /* out of memory */
    file = profile_encode(saved, n, &fn);
    if (file != NULL && (fn != size || memcmp(file, data, size) != 0))
        abort();
    free(file);
    ccol_free(saved);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *doc = NULL;
    size_t len = 0;
    char why[256];
    ccol_sync *s = NULL;
    ccol_status checked, loaded;

    why[0] = '\0';
    if (profile_parse(data, size, &doc, &len, why, sizeof why) != 0) {
        if (why[0] == '\0')
            abort(); /* a refusal must say why */
        return 0;
    }
    if (doc != data + PROFILE_HEADER || len != size - PROFILE_HEADER)
        abort();
    if (ccol_sync_create(NULL, &s) != CCOL_OK)
        abort();
    checked = ccol_sync_profile_check(s, doc, len);
    loaded = ccol_sync_profile_load(s, doc, len);
    if (checked != loaded && loaded != CCOL_ERR_NO_MEMORY)
        abort();
    if (loaded == CCOL_OK)
        round_trip(s, data, size);
    else if (ccol_sync_errmsg(s)[0] == '\0' ||
             ccol_sync_profile_frames(s) != 0)
        abort(); /* a failed load says why and changes nothing */
    ccol_sync_destroy(s);
    return 0;
}
