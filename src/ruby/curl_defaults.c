/* curl_defaults.c: libcurl's set-up for the module (curl_defaults.h). */

#include <fcntl.h>
#include <pthread.h>

#include "curl_defaults.h"

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc = CURLE_FAILED_INIT;

static void global_init(void)
{
    global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int mm_curl_ready(void)
{
    pthread_once(&global_once, global_init);
    return global_rc == CURLE_OK;
}

/* libcurl 7.88 leaves its sockets inheritable: a pooled backend
 * connection would go on in a process a script or mod_cgi starts. */
void mm_curl_cloexec(curl_socket_t fd)
{
    int flags = fcntl(fd, F_GETFD);

    if (flags >= 0) {
        fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
    }
}

static int cloexec(void *clientp, curl_socket_t fd, curlsocktype purpose)
{
    (void)clientp;
    (void)purpose;
    mm_curl_cloexec(fd);
    return CURL_SOCKOPT_OK;
}

void mm_curl_defaults(CURL *easy)
{
    curl_easy_setopt(easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy, CURLOPT_SOCKOPTFUNCTION, cloexec);
    curl_easy_setopt(easy, CURLOPT_PROXY, "");
    /* No proxy, so no host is excepted from it: without this, libcurl
     * would read no_proxy and NO_PROXY from the environment for each
     * transfer, to no effect. */
    curl_easy_setopt(easy, CURLOPT_NOPROXY, "");
}
