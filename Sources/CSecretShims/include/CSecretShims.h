// The static SecretSchema of ostack (SPEC §4) and non-variadic helpers. Filled in by KeyringKit.
#ifndef OSTACK_CSECRETSHIMS_H
#define OSTACK_CSECRETSHIMS_H
#include <libsecret/secret.h>
#endif
