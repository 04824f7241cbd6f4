-- The "realistic" handler: parse the query string, set five response headers,
-- build a body of about 1 KB in a loop. realistic.mrb is the same program.
function handle(r)
  local params, count = {}, 0
  for k, v in string.gmatch(r.args or "", "([^&=]+)=?([^&]*)") do
    params[k] = v
    count = count + 1
  end
  local name = params["name"] or "world"
  local n = tonumber(params["n"] or "16")

  local h = r.headers_out
  h["Cache-Control"] = "no-store"
  h["X-Bench-Name"] = name
  h["X-Bench-Lines"] = tostring(n)
  h["X-Bench-Params"] = tostring(count)
  h["X-Bench-Handler"] = "realistic"
  r.content_type = "text/plain"

  local body = {}
  for i = 0, n - 1 do
    body[#body + 1] = i .. ": hello " .. name .. ", this is line " .. (i + 1) .. " of " .. n .. "\n"
  end
  r:puts(table.concat(body))
end
