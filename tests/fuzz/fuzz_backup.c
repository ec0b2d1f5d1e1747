/* fuzz_backup: libFuzzer target for the backup file parser
 * (fsm/backup_file.h), what `oncectl snapshot verify` and `onced --restore`
 * read from a file an operator hands them.
 *
 * Input: one whole backup file. Checked besides "no crash, no leak, no UB":
 * a refusal names an offset inside the input (or its end); a file that is
 * accepted is canonical: the header, snapshot and trailer written again
 * from what verify returned are the same bytes.
 *
 * Run: ./tests/fuzz/fuzz_backup -max_total_time=60 WORKDIR
 *      tests/fuzz/corpus/backup */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsm/backup_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                   \
    do {                                                              \
        if (!(cond)) {                                                \
            fprintf(stderr, "fuzz_backup: %s:%d: check failed: %s\n", \
                    __FILE__, __LINE__, #cond);                       \
            abort();                                                  \
        }                                                             \
    } while (0)

/* Backups bigger than this are not interesting here and slow to hash. */
#define INPUT_MAX (4u << 20)

static void check_canonical(const uint8_t *data,
                            size_t size,
                            struct backup_info *info,
                            struct fsm *g)
{
    uint8_t *again;
    uint64_t total = backup_file_size(info);

    CHECK(total == size);
    CHECK(fsm_snapshot_size(g) == info->snapshot_len);
    again = malloc(size);
    CHECK(again != NULL);
    backup_header_encode(info, again);
    fsm_snapshot_write(g, again + BACKUP_HDR_LEN, info->snapshot_len);
    backup_trailer_encode(info, again, BACKUP_HDR_LEN + info->snapshot_len,
                          again + BACKUP_HDR_LEN + info->snapshot_len);
    CHECK(memcmp(again, data, size) == 0);
    free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct backup_info info;
    struct fsm *g = NULL;
    char err[ERR_MSG_SIZE];
    uint64_t off = 0;
    int rv;

    if (size > INPUT_MAX) {
        return 0;
    }
    rv = backup_verify(data, size, &info, &g, &off, err);
    if (rv != 0) {
        CHECK(g == NULL);
        CHECK(off <= size);
        CHECK(err[0] != '\0');
        return 0;
    }
    CHECK(g != NULL);
    check_canonical(data, size, &info, g);
    fsm_free(g);
    return 0;
}
