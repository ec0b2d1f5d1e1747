package once

// Version is this package's version: the repository's one number
// (configure.ac's AC_INIT), checked by the test suite.
const Version = "0.1.0"
