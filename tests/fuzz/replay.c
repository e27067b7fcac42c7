/*
 * replay.c - runs a libFuzzer harness over every file of a corpus folder, so
 * the committed corpus (and every past crash input) is replayed by the normal
 * test run without clang. Prints "N passed, 0 failed"; a crash fails the test.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    long n;

    if (f == NULL)
        return -1;
    if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 ||
        fseek(f, 0, SEEK_SET) != 0) {
        fclose(f);
        return -1;
    }
    buf = malloc((size_t)n + 1);
    if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        fclose(f);
        return -1;
    }
    fclose(f);
    LLVMFuzzerTestOneInput(buf, (size_t)n);
    free(buf);
    return 0;
}

int
main(int argc, char **argv)
{
    int count = 0;
    for (int i = 1; i < argc; i++) {
        DIR *d = opendir(argv[i]);
        struct dirent *e;
        if (d == NULL) {
            fprintf(stderr, "replay: cannot open corpus %s\n", argv[i]);
            return 1;
        }
        while ((e = readdir(d)) != NULL) {
            char path[4096];
            if (e->d_name[0] == '.')
                continue;
            snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
            if (replay_file(path) != 0) {
                fprintf(stderr, "replay: cannot read %s\n", path);
                closedir(d);
                return 1;
            }
            count++;
        }
        closedir(d);
    }
    if (count == 0) {
        fprintf(stderr, "replay: empty corpus\n");
        return 1;
    }
    printf("%d passed, 0 failed\n", count);
    return 0;
}
