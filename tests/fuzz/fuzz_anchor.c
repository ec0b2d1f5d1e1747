/* fuzz_anchor: libFuzzer target for the log-time anchor file's parser
 * (src/raft/anchor.c), which reads DIR/ltime-anchor at every start.
 *
 * Checked, besides "no crash, no leak, no UB":
 *   - anchor_parse returns 0 or -1, and -1 always with a reason;
 *   - what parses has a well-formed boot id, and anchor_format gives back
 *     exactly the input (the file has one spelling of a pair).
 *
 * Run: ./tests/fuzz/fuzz_anchor -max_total_time=60 WORKDIR
 *      tests/fuzz/corpus/anchor */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "raft/anchor.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                   \
    do {                                                              \
        if (!(cond)) {                                                \
            fprintf(stderr, "fuzz_anchor: %s:%d: check failed: %s\n", \
                    __FILE__, __LINE__, #cond);                       \
            abort();                                                  \
        }                                                             \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct anchor a;
    char why[256] = "", line[ANCHOR_FILE_MAX + 1];
    int rv = anchor_parse((const char *)data, size, &a, why, sizeof why);

    CHECK(rv == 0 || rv == -EBADMSG);
    if (rv != 0) {
        CHECK(why[0] != '\0');
        return 0;
    }
    CHECK(strlen(a.boot_id) == ANCHOR_BOOT_ID_LEN);
    rv = anchor_format(&a, line, sizeof line);
    CHECK(rv >= 0 && (size_t)rv == size && memcmp(line, data, size) == 0);
    return 0;
}
