/* fuzz_bytecode.c: libFuzzer harness for the bytecode check (src/verify.c).
 *
 * The check runs on what mruby's loader made of a file; this harness skips
 * the loader (mruby's code, not ours) and hands the check any code at all:
 * the script below is compiled once, and each input replaces the code of
 * its top-level irep (the literals, symbols and nested ireps stay the
 * script's). Input: nregs (one byte), nlocals (one byte), the number of
 * exception handlers (one byte, their 13-byte entries at the end), then the
 * instructions. Whatever they say, the check must finish without reading
 * outside the irep (AddressSanitizer) or overflowing (UBSan); and it must
 * pass the script's own code, checked once at start. That mrbc's output
 * passes is also tested against httpd (test/core/test_bytecode.py). The code is
 * not run: the check does not claim that all it passes is safe to run
 * (docs/directives.md). The seeds (fuzz/corpus/bytecode) are the code of
 * small scripts, made with mrbc by tools/fuzz. */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mruby.h>
#include <mruby/compile.h>
#include <mruby/irep.h>
#include <mruby/proc.h>

#include "verify.h"

static const char script[] =
    "class Counter\n"
    "  def initialize(start = 0, step: 1) @n = start; @step = step end\n"
    "  def bump(*more, &blk) @n += @step + more.size; blk&.call(@n); self end\n"
    "end\n"
    "c = Counter.new(2, step: 3)\n"
    "begin\n"
    "  [1, 2].each { |i| c.bump(i) { |n| raise ArgumentError, \"big #{n}\" if n > 100 } }\n"
    "rescue ArgumentError => e\n"
    "  $err = e.message\n"
    "ensure\n"
    "  $done = 1.5\n"
    "end\n"
    "h = { a: 1, 'b' => [1, *[2, 3]], c: 1..4 }\n";

static mrb_state *mrb;
static const mrb_irep *model;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    mrbc_context *cxt;
    mrb_value proc;
    char why[256];

    mrb = mrb_open();
    if (mrb == NULL) {
        abort();
    }
    cxt = mrbc_context_new(mrb);
    cxt->no_exec = TRUE;
    proc = mrb_load_string_cxt(mrb, script, cxt);
    mrbc_context_free(mrb, cxt);
    if (mrb->exc || !mrb_proc_p(proc)) {
        abort();
    }
    mrb_gc_register(mrb, proc);
    model = mrb_proc_ptr(proc)->body.irep;
    if (!mm_verify_irep(model, why, sizeof why)) {
        fprintf(stderr, "mrbc's code refused: %s\n", why);
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mrb_irep irep;
    mrb_code *code;
    size_t handlers, ilen;
    char why[256];

    if (size < 3) {
        return 0;
    }
    handlers = data[2];
    if (size - 3 < handlers * sizeof(struct mrb_irep_catch_handler)) {
        return 0;
    }
    ilen = size - 3 - handlers * sizeof(struct mrb_irep_catch_handler);
    /* Exactly the bytes given, so that a read past them is seen. */
    code = malloc(size - 3 ? size - 3 : 1);
    if (code == NULL) {
        abort();
    }
    memcpy(code, data + 3, size - 3);
    memcpy(&irep, model, sizeof irep);
    irep.nregs = data[0];
    irep.nlocals = data[1];
    irep.clen = (uint16_t)handlers;
    irep.iseq = code;
    irep.ilen = (uint32_t)ilen;
    mm_verify_irep(&irep, why, sizeof why);
    free(code);
    return 0;
}
