// Non-variadic wrappers around curl_easy_setopt / curl_easy_getinfo: both are C variadic
// functions, which Swift cannot call. Each wrapper fixes the argument type of one option family.
#ifndef OSTACK_CCURLSHIMS_H
#define OSTACK_CCURLSHIMS_H
#include <curl/curl.h>
#include <stddef.h>

typedef size_t (*ccurl_data_callback)(char *data, size_t size, size_t count, void *context);

/// Options taking a `long` (timeouts, flags, verification levels).
CURLcode ccurl_setopt_long(CURL *handle, CURLoption option, long value);
/// Options taking a C string (URL, method, protocols). libcurl copies strings.
CURLcode ccurl_setopt_string(CURL *handle, CURLoption option, const char *value);
/// Options taking an opaque pointer (user data for callbacks, header lists).
CURLcode ccurl_setopt_pointer(CURL *handle, CURLoption option, void *value);
/// Options taking a curl_off_t (request body size).
CURLcode ccurl_setopt_offset(CURL *handle, CURLoption option, curl_off_t value);
/// CURLOPT_WRITEFUNCTION / CURLOPT_HEADERFUNCTION.
CURLcode ccurl_setopt_callback(CURL *handle, CURLoption option, ccurl_data_callback callback);

/// CURLINFO_* values of type long (response code, connection count).
CURLcode ccurl_getinfo_long(CURL *handle, CURLINFO info, long *value);

#endif
