/* unit-rpc: the pure parts of the RPC layer (frames, envelopes, TLS
 * sessions in memory), and the hand-written encoders of the hot messages
 * against protobuf-c (test_codec.c). */
#include <check.h>
#include <stdlib.h>

Suite *frame_suite(void);
Suite *tls_suite(void);
Suite *codec_suite(void);

int main(void)
{
    SRunner *sr = srunner_create(frame_suite());
    int failed;

    srunner_add_suite(sr, tls_suite());
    srunner_add_suite(sr, codec_suite());
    srunner_run_all(sr, CK_ENV);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
