/* curl_defaults.h: what libcurl gets from the module, for every handle of
 * Apache::HTTP's calls and Apache::Socket's connections. */
#ifndef MM_CURL_DEFAULTS_H
#define MM_CURL_DEFAULTS_H

#include <curl/curl.h>

/* curl_global_init, once per process (it must not run in two threads at
 * once); whether it succeeded. */
int mm_curl_ready(void);

/* No signals (worker threads), sockets closed on exec, and no proxy taken
 * from the server's environment (http_proxy, all_proxy: a server's calls
 * go where the script says). */
void mm_curl_defaults(CURL *easy);

/* Marks fd close-on-exec (what mm_curl_defaults's socket callback does;
 * for a caller with a socket callback of its own). */
void mm_curl_cloexec(curl_socket_t fd);

#endif
