/* Replays fuzzer inputs (files named on the command line, or every file of
 * the directories named) through LLVMFuzzerTestOneInput once each: the
 * corpus and every crash the fuzzer found run as a ctest in every build,
 * under the build's sanitizers, without libFuzzer. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return 1;
    }
    uint8_t buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, n);
    return 0;
}

int main(int argc, char **argv) {
    int bad = 0, count = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            perror(argv[i]);
            bad = 1;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            bad |= run_file(argv[i]);
            count++;
            continue;
        }
        DIR *d = opendir(argv[i]);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            char p[4096];
            if ((size_t)snprintf(p, sizeof p, "%s/%s", argv[i], e->d_name) >= sizeof p) continue;
            bad |= run_file(p);
            count++;
        }
        if (d) closedir(d);
    }
    printf("replayed %d inputs\n", count);
    return bad || count == 0;
}
