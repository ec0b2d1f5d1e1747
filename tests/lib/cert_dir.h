/* Certificates for a suite, made by scripts/make-certs.sh (the openssl
 * CLI) in a temporary directory (cert_dir.c): tls/tls's tests and the
 * HTTP listener's TLS terminator's.
 *
 * cert_dir_open makes the directory (once per suite: an unchecked
 * fixture), cert_dir_make runs make-certs.sh in it (cert_dir() is its
 * name), cert_dir_path names a
 * file there (one of 8 rotating static buffers: valid for the next 7
 * calls), cert_dir_close removes it. Failures fail the test. */
#ifndef ONCE_TESTS_CERT_DIR_H_
#define ONCE_TESTS_CERT_DIR_H_

/* @tag names the directory: /tmp/once-test-TAG.XXXXXX. */
void cert_dir_open(const char *tag);

/* make-certs.sh @args (its first word the command, then "%s" for the
 * directory, e.g. "node %s n1 127.0.0.1"), signed by the CA named @ca. */
void cert_dir_make(const char *ca, const char *args_fmt, ...)
    __attribute__((format(printf, 2, 3)));

const char *cert_dir_path(const char *name);

/* The directory itself. */
const char *cert_dir(void);

void cert_dir_close(void);

#endif
