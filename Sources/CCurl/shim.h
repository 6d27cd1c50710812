#ifndef OSTACK_CCURL_SHIM_H
#define OSTACK_CCURL_SHIM_H
#include <curl/curl.h>
#endif
