-- CPU-bound: a counted loop, its length from the query string (?N).
function handle(r)
  local n = tonumber(r.args or "1000000")
  local sum = 0
  local i = 0
  while i < n do
    sum = sum + i % 7
    i = i + 1
  end
  r:puts(tostring(sum))
end
