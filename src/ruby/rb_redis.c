/* rb_redis.c: the C half of Apache::Redis, on hiredis: its command
 * encoder (Apache::Redis.__format) and its reply reader
 * (Apache::Redis::Reader), so no RESP parser of ours. The connection is an
 * Apache::Socket; the Ruby half (mrblib/redis.rb) drives both. */

#include <mruby.h>
#include <mruby/array.h>
#include <mruby/class.h>
#include <mruby/data.h>
#include <mruby/error.h>
#include <mruby/string.h>

#include <hiredis/hiredis.h>

#include "binding.h"

/* The most nested arrays a reply may have (deeper is refused). */
#define REDIS_MAX_DEPTH 16

static void reader_free(mrb_state *mrb, void *p)
{
    if (p) {
        redisReaderFree(p);
    }
}

static const mrb_data_type reader_type = {"Apache::Redis::Reader", reader_free};

static struct RClass *redis_error(mrb_state *mrb)
{
    return mrb_class_get_under(mrb, mrb_class_get_under(mrb, mm_binding_apache(mrb), "Redis"), "Error");
}

static redisReader *reader_of(mrb_state *mrb, mrb_value self)
{
    redisReader *rd = mrb_data_get_ptr(mrb, self, &reader_type);

    if (rd == NULL) {
        mrb_raise(mrb, E_RUNTIME_ERROR, "Apache::Redis::Reader: not initialized");
    }
    return rd;
}

static mrb_value reader_init(mrb_state *mrb, mrb_value self)
{
    redisReader *rd = redisReaderCreate();

    if (rd == NULL) {
        mrb_raise(mrb, E_RUNTIME_ERROR, "Apache::Redis: out of memory");
    }
    reader_free(mrb, DATA_PTR(self));
    mrb_data_init(self, rd, &reader_type);
    return self;
}

/* reader.feed(str): hands bytes from the server to the reader. */
static mrb_value reader_feed(mrb_state *mrb, mrb_value self)
{
    redisReader *rd = reader_of(mrb, self);
    mrb_value str;

    mrb_get_args(mrb, "S", &str);
    if (redisReaderFeed(rd, RSTRING_PTR(str), (size_t)RSTRING_LEN(str)) != REDIS_OK) {
        mrb_raisef(mrb, redis_error(mrb), "Apache::Redis: %s", rd->errstr);
    }
    return self;
}

/* A reply as Ruby sees it: String, Integer, nil, Array; a status as a
 * String; an error as an Apache::Redis::Error object (not raised). */
static mrb_value to_ruby(mrb_state *mrb, const redisReply *rp, int depth)
{
    mrb_value a;
    size_t i;

    switch (rp->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
        return mrb_str_new(mrb, rp->str, (mrb_int)rp->len);
    case REDIS_REPLY_INTEGER:
        return mrb_int_value(mrb, (mrb_int)rp->integer);
    case REDIS_REPLY_ERROR:
        return mrb_exc_new(mrb, redis_error(mrb), rp->str, (mrb_int)rp->len);
    case REDIS_REPLY_ARRAY:
        if (depth >= REDIS_MAX_DEPTH) {
            return mrb_exc_new_lit(mrb, redis_error(mrb), "Apache::Redis: a reply nested too deep");
        }
        a = mrb_ary_new_capa(mrb, (mrb_int)rp->elements);
        for (i = 0; i < rp->elements; i++) {
            mrb_ary_push(mrb, a, to_ruby(mrb, rp->element[i], depth + 1));
        }
        return a;
    default:
        return mrb_nil_value();
    }
}

/* hiredis's memory while Ruby objects are made of it: held by a Data
 * object, so a raise (out of memory) leaves it to the collector. */
static void reply_free(mrb_state *mrb, void *p)
{
    if (p) {
        freeReplyObject(p);
    }
}

static void command_free(mrb_state *mrb, void *p)
{
    if (p) {
        redisFreeCommand(p);
    }
}

static const mrb_data_type reply_type = {"hiredis reply", reply_free};
static const mrb_data_type command_type = {"hiredis command", command_free};

static void release(mrb_state *mrb, mrb_value holder, const mrb_data_type *type)
{
    type->dfree(mrb, DATA_PTR(holder));
    DATA_PTR(holder) = NULL;
}

/* reader.gets: [reply] once a whole reply has arrived, else nil. */
static mrb_value reader_gets(mrb_state *mrb, mrb_value self)
{
    redisReader *rd = reader_of(mrb, self);
    void *reply = NULL;
    mrb_value holder, out;

    holder = mrb_obj_value(mrb_data_object_alloc(mrb, mrb->object_class, NULL, &reply_type));
    if (redisReaderGetReply(rd, &reply) != REDIS_OK) {
        mrb_raisef(mrb, redis_error(mrb), "Apache::Redis: %s", rd->errstr);
    }
    if (reply == NULL) {
        return mrb_nil_value();
    }
    DATA_PTR(holder) = reply;
    out = mrb_ary_new_capa(mrb, 1);
    mrb_ary_push(mrb, out, to_ruby(mrb, reply, 0));
    release(mrb, holder, &reply_type);
    return out;
}

/* Apache::Redis.__format(args): the command in RESP (hiredis encodes it). */
static mrb_value redis_format(mrb_state *mrb, mrb_value self)
{
    mrb_value args, holder, out, lenstr, argstr;
    mrb_int n, i;
    const char **argv;
    size_t *lens;
    char *cmd = NULL;
    int len;

    mrb_get_args(mrb, "A", &args);
    n = RARRAY_LEN(args);
    if (n < 1 || n > 1024 * 1024) {
        mrb_raise(mrb, E_ARGUMENT_ERROR, "Apache::Redis: a command is 1 or more arguments");
    }
    for (i = 0; i < n; i++) {
        if (!mrb_string_p(RARRAY_PTR(args)[i])) {
            mrb_raise(mrb, E_TYPE_ERROR, "Apache::Redis: arguments must be Strings");
        }
    }
    /* The arrays live in Strings, which the collector frees whatever
     * happens; 64 bytes at least, so that they are malloc'd (aligned), not
     * embedded in the String object. */
    argstr = mrb_str_new(mrb, NULL, (mrb_int)(sizeof *argv * (size_t)(n < 8 ? 8 : n)));
    lenstr = mrb_str_new(mrb, NULL, (mrb_int)(sizeof *lens * (size_t)(n < 8 ? 8 : n)));
    argv = (const char **)RSTRING_PTR(argstr);
    lens = (size_t *)RSTRING_PTR(lenstr);
    for (i = 0; i < n; i++) {
        argv[i] = RSTRING_PTR(RARRAY_PTR(args)[i]);
        lens[i] = (size_t)RSTRING_LEN(RARRAY_PTR(args)[i]);
    }
    holder = mrb_obj_value(mrb_data_object_alloc(mrb, mrb->object_class, NULL, &command_type));
    len = redisFormatCommandArgv(&cmd, (int)n, argv, lens);
    if (len < 0 || cmd == NULL) {
        mrb_raise(mrb, E_RUNTIME_ERROR, "Apache::Redis: out of memory");
    }
    DATA_PTR(holder) = cmd;
    out = mrb_str_new(mrb, cmd, len);
    release(mrb, holder, &command_type);
    return out;
}

void mm_redis_init(mrb_state *mrb)
{
    struct RClass *redis = mrb_define_class_under(mrb, mm_binding_apache(mrb), "Redis", mrb->object_class);
    struct RClass *reader = mrb_define_class_under(mrb, redis, "Reader", mrb->object_class);

    MRB_SET_INSTANCE_TT(reader, MRB_TT_DATA);
    mrb_define_method(mrb, reader, "initialize", reader_init, MRB_ARGS_NONE());
    mrb_define_method(mrb, reader, "feed", reader_feed, MRB_ARGS_REQ(1));
    mrb_define_method(mrb, reader, "gets", reader_gets, MRB_ARGS_NONE());
    mrb_define_class_method(mrb, redis, "__format", redis_format, MRB_ARGS_REQ(1));
}
