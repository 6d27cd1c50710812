#ifndef OSTACK_CLIBSECRET_SHIM_H
#define OSTACK_CLIBSECRET_SHIM_H
#include <libsecret/secret.h>
#endif
