/* output.h: the response body a script writes (output.c), for the
 * harness. mm_run_write and mm_run_discard_output (run.h) are the API's. */
#ifndef MM_OUTPUT_H
#define MM_OUTPUT_H

#include "httpd.h"

/* Whether r has output buffered or already passed down. */
int mm_output_pending(request_rec *r);

/* Whether the response has begun: output went down the chain and httpd
 * sent the headers with it. Until then the status can still change. */
int mm_output_began(request_rec *r);

/* Passes what is buffered down the chain, followed by EOS if eos. */
void mm_output_pass(request_rec *r, int eos);

/* Drops what is buffered (not what went down). */
void mm_output_drop(request_rec *r);

#endif
