/* fuzz_rite.c: libFuzzer harness for the framing check of bytecode files
 * (src/rite.c) and, behind it, mruby's own loader.
 *
 * Each input is a whole .mrb file. What the check refuses is dropped, as
 * the module drops it. What it passes goes where a file's bytes go in the
 * module: mruby's loader (mrb_read_irep_buf), which must then load it, and
 * the code check (verify.c); then every instruction's line and file are
 * looked up and every local variable name read, as a backtrace or
 * Kernel#local_variables would. None of this may read outside what was
 * given or allocated (AddressSanitizer, with libmruby instrumented too) or
 * overflow (UBSan). The seeds are mrbc's output, with and without debug
 * information, for the scripts of fuzz/corpus/bytecode (made by tools/fuzz). */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mruby.h>
#include <mruby/irep.h>
#include <mruby/debug.h>
#include <mruby/dump.h>
#include <mruby/error.h>

#include "verify.h"

static mrb_state *mrb;

typedef struct {
    const uint8_t *bin;
    size_t len;
} input_t;

static volatile uintptr_t sink;

static void look(const mrb_irep *irep)
{
    uint32_t pc;
    int i;

    for (pc = 0; pc < irep->ilen; pc++) {
        sink += (uintptr_t)mrb_debug_get_line(mrb, irep, pc);
        sink += (uintptr_t)mrb_debug_get_filename(mrb, irep, pc);
    }
    for (i = 0; irep->lv && i + 1 < irep->nlocals; i++) {
        sink += irep->lv[i];
    }
    for (i = 0; i < irep->rlen; i++) {
        look(irep->reps[i]);
    }
}

static mrb_value load(mrb_state *m, void *ud)
{
    input_t *in = ud;
    mrb_irep *irep = mrb_read_irep_buf(m, in->bin, in->len);
    char why[256];

    if (irep == NULL) {
        fprintf(stderr, "passed by the check, refused by mruby's loader\n");
        abort();
    }
    if (mm_verify_irep(irep, why, sizeof why)) {
        look(irep);
    }
    mrb_irep_decref(m, irep);
    return mrb_nil_value();
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    mrb = mrb_open();
    if (mrb == NULL) {
        abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Exactly the bytes given, so that a read past them is seen. */
    uint8_t *bin = malloc(size ? size : 1);
    input_t in = {bin, size};
    char why[256];
    int ai;
    mrb_bool raised = FALSE;

    if (bin == NULL) {
        abort();
    }
    memcpy(bin, data, size);
    if (mm_verify_rite(bin, size, why, sizeof why)) {
        ai = mrb_gc_arena_save(mrb);
        mrb_protect_error(mrb, load, &in, &raised);
        mrb_gc_arena_restore(mrb, ai);
        if (raised) {
            fprintf(stderr, "mruby's loader raised on a file the check passed\n");
            abort();
        }
    }
    free(bin);
    return 0;
}
