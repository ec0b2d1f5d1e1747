/* Certificates for the access tests, made by the openssl CLI in a
 * temporary directory (access_certs.c). */
#ifndef ONCE_TESTS_ACCESS_CERTS_H_
#define ONCE_TESTS_ACCESS_CERTS_H_

#include <openssl/x509.h>

/* A self-signed certificate with subject CN @cn (NULL: "x") and the
 * subjectAltName @san (openssl syntax, "URI:a,DNS:b"; NULL: none). The
 * caller X509_frees it. Fails the test if openssl cannot make it. */
X509 *test_cert(const char *cn, const char *san);

#endif
