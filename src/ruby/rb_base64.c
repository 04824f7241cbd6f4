/* rb_base64.c: the Base64 module as CRuby has it: encode64 (lines of 60
 * characters), strict_encode64, urlsafe_encode64 (padding: true), and
 * their decoders: decode64 lenient as CRuby's, strict_decode64 and
 * urlsafe_decode64 raising ArgumentError for a text that is not Base64
 * (the codec is base64.c). */

#include <mruby.h>
#include <mruby/class.h>
#include <mruby/string.h>

#include "base64.h"
#include "binding.h"
#include "classes.h"

static mrb_value encode(mrb_state *mrb, mrb_value data, int flags)
{
    size_t n = (size_t)RSTRING_LEN(data);
    mrb_value out = mrb_str_new(mrb, NULL, (mrb_int)mm_base64_encoded_len(n, flags));

    /* data is read after the allocation, which may run the GC: it is an
     * argument of the running method, so it stays */
    mm_base64_encode((const unsigned char *)RSTRING_PTR(data), n, RSTRING_PTR(out), flags);
    return out;
}

/* Base64.encode64(bin), strict_encode64(bin): the flags are the method's
 * index. */
static mrb_value b64_encode(mrb_state *mrb, mrb_value self, int flags)
{
    mrb_value data;

    mrb_get_args(mrb, "S", &data);
    return encode(mrb, data, flags);
}
MM_INDEXED_FUNCS8(b64_encode);

/* Base64.urlsafe_encode64(bin, padding: true) */
static mrb_value b64_urlsafe_encode(mrb_state *mrb, mrb_value self)
{
    mrb_sym names[1];
    mrb_value values[1], data;
    mrb_kwargs kw;

    names[0] = mrb_intern_lit(mrb, "padding");
    kw.num = 1;
    kw.required = 0;
    kw.table = names;
    kw.values = values;
    kw.rest = NULL;
    mrb_get_args(mrb, "S:", &data, &kw);
    return encode(mrb, data,
                  MM_B64_URLSAFE | (!mrb_undef_p(values[0]) && !mrb_test(values[0]) ? MM_B64_NOPAD : 0));
}

/* An empty String with room for what in_len characters decode to. */
static mrb_value decoded_buffer(mrb_state *mrb, size_t in_len)
{
    return mrb_str_new(mrb, NULL, (mrb_int)(in_len / 4 * 3 + 3));
}

/* Base64.decode64(str): CRuby's lenient reading. */
static mrb_value b64_decode(mrb_state *mrb, mrb_value self)
{
    mrb_value text, out;
    size_t n;

    mrb_get_args(mrb, "S", &text);
    out = decoded_buffer(mrb, (size_t)RSTRING_LEN(text));
    n = mm_base64_decode_lax(RSTRING_PTR(text), (size_t)RSTRING_LEN(text), (unsigned char *)RSTRING_PTR(out));
    return mrb_str_resize(mrb, out, (mrb_int)n);
}

/* Base64.strict_decode64(str), urlsafe_decode64(str): urlsafe is the
 * method's index. */
static mrb_value b64_strict_decode(mrb_state *mrb, mrb_value self, int urlsafe)
{
    mrb_value text, out;
    const char *why;
    size_t where;
    long n;

    mrb_get_args(mrb, "S", &text);
    out = decoded_buffer(mrb, (size_t)RSTRING_LEN(text));
    n = mm_base64_decode_strict(RSTRING_PTR(text), (size_t)RSTRING_LEN(text),
                                (unsigned char *)RSTRING_PTR(out), urlsafe, &why, &where);
    if (n < 0) {
        mrb_raisef(mrb, E_ARGUMENT_ERROR, "invalid base64: %s (byte %i)", why, (mrb_int)where);
    }
    return mrb_str_resize(mrb, out, (mrb_int)n);
}
MM_INDEXED_FUNCS8(b64_strict_decode);

void mm_base64_init(mrb_state *mrb)
{
    struct RClass *b64 = mrb_define_module(mrb, "Base64");
    struct RClass *meta = mrb_class_ptr(mrb_singleton_class(mrb, mrb_obj_value(b64)));

    mrb_define_method(mrb, meta, "encode64", b64_encode_at[MM_B64_LINES], MRB_ARGS_ANY());
    mrb_define_method(mrb, meta, "strict_encode64", b64_encode_at[0], MRB_ARGS_ANY());
    mrb_define_class_method(mrb, b64, "urlsafe_encode64", b64_urlsafe_encode, MRB_ARGS_ARG(1, 1));
    mrb_define_class_method(mrb, b64, "decode64", b64_decode, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, meta, "strict_decode64", b64_strict_decode_at[0], MRB_ARGS_ANY());
    mrb_define_method(mrb, meta, "urlsafe_decode64", b64_strict_decode_at[1], MRB_ARGS_ANY());
}
