// Non-variadic wrappers around curl_easy_setopt / curl_easy_getinfo (Swift cannot call C
// variadic functions). Filled in by CurlKit.
#ifndef OSTACK_CCURLSHIMS_H
#define OSTACK_CCURLSHIMS_H
#include <curl/curl.h>
#endif
