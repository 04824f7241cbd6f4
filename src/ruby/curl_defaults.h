/* curl_defaults.h: what every libcurl handle of the module is given
 * (Apache::HTTP's calls, Apache::Socket's connections). */
#ifndef MM_CURL_DEFAULTS_H
#define MM_CURL_DEFAULTS_H

#include <curl/curl.h>
#include <fcntl.h>

/* libcurl 7.88 leaves its sockets inheritable: a pooled backend
 * connection would go on in a process a script or mod_cgi starts. */
static int mm_curl_cloexec(void *clientp, curl_socket_t fd, curlsocktype purpose)
{
    int flags = fcntl(fd, F_GETFD);

    (void)clientp;
    (void)purpose;
    if (flags >= 0) {
        fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
    }
    return CURL_SOCKOPT_OK;
}

/* No signals (worker threads), sockets closed on exec, and no proxy taken
 * from the server's environment (http_proxy, all_proxy: a server's
 * calls go where the script says). */
static inline void mm_curl_defaults(CURL *easy)
{
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_SOCKOPTFUNCTION, mm_curl_cloexec);
    curl_easy_setopt(easy, CURLOPT_PROXY, "");
}

#endif
