/* rb_securerandom.c: SecureRandom as CRuby has it: random_bytes, hex,
 * base64, urlsafe_base64, uuid, alphanumeric, random_number. Every byte
 * comes from libcrypto's RAND_bytes: its DRBG, seeded from the kernel's
 * getrandom() and reseeded in each process httpd forks (never mruby's
 * rand, whose generator is not for secrets). */

#include <stdint.h>

#include <mruby.h>
#include <mruby/class.h>
#include <mruby/range.h>
#include <mruby/string.h>
#include <openssl/rand.h>

#include "base64.h"
#include "binding.h"
#include "classes.h"
#include "crypto.h"

/* The most bytes one call makes: more is a mistake, not a key. */
#define MM_RANDOM_MAX (1024 * 1024)

static void random_fill(mrb_state *mrb, void *buf, size_t n)
{
    if (n > 0 && RAND_bytes(buf, (int)n) != 1) {
        mm_crypto_raise(mrb, E_RUNTIME_ERROR, "no random bytes from libcrypto");
    }
}

/* The size argument of random_bytes and the others: nil means 16. */
static size_t size_arg(mrb_state *mrb, mrb_value n)
{
    mrb_int v;

    if (mrb_nil_p(n)) {
        return 16;
    }
    if (!mrb_integer_p(n)) {
        mrb_raisef(mrb, E_TYPE_ERROR, "a size must be an Integer, not %s", mrb_obj_classname(mrb, n));
    }
    v = mrb_integer(n);
    if (v < 0) {
        mrb_raise(mrb, E_ARGUMENT_ERROR, "negative string size (or size too big)");
    }
    if (v > MM_RANDOM_MAX) {
        mrb_raisef(mrb, E_ARGUMENT_ERROR, "%i random bytes at once: at most %i", v, (mrb_int)MM_RANDOM_MAX);
    }
    return (size_t)v;
}

static mrb_value random_string(mrb_state *mrb, size_t n)
{
    mrb_value s = mrb_str_new(mrb, NULL, (mrb_int)n);

    random_fill(mrb, RSTRING_PTR(s), n);
    return s;
}

/* SecureRandom.random_bytes(n = 16), hex(n = 16), base64(n = 16): n
 * random bytes, as they are or encoded (the method's index). */
static mrb_value sr_bytes(mrb_state *mrb, mrb_value self, mm_form_e form)
{
    mrb_value n = mrb_nil_value(), bytes;

    mrb_get_args(mrb, "|o", &n);
    bytes = random_string(mrb, size_arg(mrb, n));
    if (form == MM_AS_BINARY) {
        return bytes;
    }
    return mm_crypto_formatted(mrb, form, (const unsigned char *)RSTRING_PTR(bytes),
                               (size_t)RSTRING_LEN(bytes));
}
MM_INDEXED_FUNCS8(sr_bytes);

/* SecureRandom.urlsafe_base64(n = 16, padding = false) */
static mrb_value sr_urlsafe_base64(mrb_state *mrb, mrb_value self)
{
    mrb_value n = mrb_nil_value(), out;
    mrb_bool padding = FALSE;
    unsigned char buf[256], *bytes = buf;
    size_t len;

    mrb_get_args(mrb, "|ob", &n, &padding);
    len = size_arg(mrb, n);
    out = mrb_str_new(mrb, NULL,
                      (mrb_int)mm_base64_encoded_len(len, MM_B64_URLSAFE | (padding ? 0 : MM_B64_NOPAD)));
    if (len > sizeof buf) {
        bytes = (unsigned char *)RSTRING_PTR(random_string(mrb, len));
    } else {
        random_fill(mrb, buf, len);
    }
    mm_base64_encode(bytes, len, RSTRING_PTR(out), MM_B64_URLSAFE | (padding ? 0 : MM_B64_NOPAD));
    return out;
}

/* SecureRandom.uuid: a random UUID (RFC 9562 version 4), lower case. */
static mrb_value sr_uuid(mrb_state *mrb, mrb_value self)
{
    static const char digits[] = "0123456789abcdef";
    unsigned char b[16];
    char text[36];
    int i, o = 0;

    random_fill(mrb, b, sizeof b);
    b[6] = (b[6] & 0x0f) | 0x40; /* version 4 */
    b[8] = (b[8] & 0x3f) | 0x80; /* variant 10 */
    for (i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) {
            text[o++] = '-';
        }
        text[o++] = digits[b[i] >> 4];
        text[o++] = digits[b[i] & 15];
    }
    return mrb_str_new(mrb, text, sizeof text);
}

/* A uniform integer in [0, bound) (bound > 0): 64 random bits, drawn again
 * while they fall in the incomplete last copy of the range (no bias). */
static uint64_t uniform(mrb_state *mrb, uint64_t bound)
{
    uint64_t r, limit = UINT64_MAX - UINT64_MAX % bound;

    do {
        random_fill(mrb, &r, sizeof r);
    } while (r >= limit);
    return r % bound;
}

/* SecureRandom.alphanumeric(n = 16): n characters of A-Z, a-z, 0-9. */
static mrb_value sr_alphanumeric(mrb_state *mrb, mrb_value self)
{
    static const char chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    mrb_value n = mrb_nil_value(), out;
    size_t len, i;
    char *p;

    mrb_get_args(mrb, "|o", &n);
    len = size_arg(mrb, n);
    out = mrb_str_new(mrb, NULL, (mrb_int)len);
    p = RSTRING_PTR(out);
    for (i = 0; i < len; i++) {
        p[i] = chars[uniform(mrb, sizeof chars - 1)];
    }
    return out;
}

/* A uniform Float in [0, 1): 50 random bits, which a Float of Debian's
 * mruby (2 bits short of a double) holds exactly, so it never rounds to 1. */
static mrb_float unit_float(mrb_state *mrb)
{
    uint64_t r;

    random_fill(mrb, &r, sizeof r);
    return (mrb_float)(r >> 14) / (mrb_float)((uint64_t)1 << 50);
}

/* In [beg, end] (or [beg, end) when excl) for an Integer range; nil when
 * it is empty. */
static mrb_value int_in_range(mrb_state *mrb, mrb_int beg, mrb_int end, int excl)
{
    uint64_t span;

    if (end < beg || (excl && end == beg)) {
        return mrb_nil_value();
    }
    span = (uint64_t)end - (uint64_t)beg + (excl ? 0 : 1);
    if (span == 0) { /* the whole of 64 bits */
        uint64_t r;

        random_fill(mrb, &r, sizeof r);
        return mrb_int_value(mrb, (mrb_int)r);
    }
    return mrb_int_value(mrb, (mrb_int)((uint64_t)beg + uniform(mrb, span)));
}

/* SecureRandom.random_number(n = 0): as CRuby's Random::Formatter: an
 * Integer in [0, n) for an Integer n > 0, a Float in [0, n) for a Float,
 * a number in a Range of Integers or Floats; a Float in [0, 1) for 0,
 * nil, a number not above 0 or an empty Range. */
static mrb_value sr_random_number(mrb_state *mrb, mrb_value self)
{
    mrb_value n = mrb_nil_value(), v = mrb_nil_value();

    mrb_get_args(mrb, "|o", &n);
    if (mrb_integer_p(n)) {
        if (mrb_integer(n) > 0) {
            v = int_in_range(mrb, 0, mrb_integer(n), 1);
        }
    } else if (mrb_float_p(n)) {
        if (mrb_float(n) > 0) {
            v = mrb_float_value(mrb, unit_float(mrb) * mrb_float(n));
        }
    } else if (mrb_range_p(n)) {
        mrb_value beg = mrb_range_beg(mrb, n), end = mrb_range_end(mrb, n);
        int excl = mrb_range_excl_p(mrb, n);

        if (mrb_integer_p(beg) && mrb_integer_p(end)) {
            v = int_in_range(mrb, mrb_integer(beg), mrb_integer(end), excl);
        } else if ((mrb_float_p(beg) || mrb_integer_p(beg)) && (mrb_float_p(end) || mrb_integer_p(end))) {
            mrb_float b = mrb_float_p(beg) ? mrb_float(beg) : (mrb_float)mrb_integer(beg);
            mrb_float e = mrb_float_p(end) ? mrb_float(end) : (mrb_float)mrb_integer(end);

            if (e > b || (e == b && !excl)) {
                v = mrb_float_value(mrb, b + unit_float(mrb) * (e - b));
            }
        } else {
            mrb_raise(mrb, E_ARGUMENT_ERROR, "a Range of Integers or Floats");
        }
    } else if (!mrb_nil_p(n)) {
        mrb_raisef(mrb, E_TYPE_ERROR, "random_number takes an Integer, a Float or a Range, not %s",
                   mrb_obj_classname(mrb, n));
    }
    return mrb_nil_p(v) ? mrb_float_value(mrb, unit_float(mrb)) : v;
}

void mm_random_init(mrb_state *mrb)
{
    struct RClass *sr = mrb_define_module(mrb, "SecureRandom");
    struct RClass *meta = mrb_class_ptr(mrb_singleton_class(mrb, mrb_obj_value(sr)));

    mrb_define_method(mrb, meta, "random_bytes", sr_bytes_at[MM_AS_BINARY], MRB_ARGS_ANY());
    mrb_define_method(mrb, meta, "hex", sr_bytes_at[MM_AS_HEX], MRB_ARGS_ANY());
    mrb_define_method(mrb, meta, "base64", sr_bytes_at[MM_AS_BASE64], MRB_ARGS_ANY());
    mrb_define_class_method(mrb, sr, "urlsafe_base64", sr_urlsafe_base64, MRB_ARGS_OPT(2));
    mrb_define_class_method(mrb, sr, "uuid", sr_uuid, MRB_ARGS_NONE());
    mrb_define_class_method(mrb, sr, "alphanumeric", sr_alphanumeric, MRB_ARGS_OPT(1));
    mrb_define_class_method(mrb, sr, "random_number", sr_random_number, MRB_ARGS_OPT(1));
}
