#ifndef OSTACK_CSODIUM_SHIM_H
#define OSTACK_CSODIUM_SHIM_H
#include <sodium.h>
#endif
