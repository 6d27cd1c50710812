// SQLCipher 3.4.1 (Debian's libsqlcipher-dev). SQLITE_HAS_CODEC must be defined before the
// header so that sqlite3_key / sqlite3_rekey are declared. The header is taken from the
// sqlcipher/ directory explicitly so a plain libsqlite3-dev header can never be picked up.
#ifndef OSTACK_CSQLCIPHER_SHIM_H
#define OSTACK_CSQLCIPHER_SHIM_H
#define SQLITE_HAS_CODEC 1
#include <sqlcipher/sqlite3.h>

// SQLITE_TRANSIENT is a macro around a function-pointer cast that Swift cannot import.
static inline sqlite3_destructor_type csqlcipher_transient(void) { return SQLITE_TRANSIENT; }

// SQLite's allocation statistics take a global mutex on every allocation; ostack never reads them
// (sqlite3_memory_used). Must run before SQLite initialises; later it is refused, harmlessly.
static inline int csqlcipher_disable_memstatus(void) { return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0); }
#endif
