# blocklist_timer.rb: runs in each child's timer thread. Every
# BLOCKLIST_REFRESH seconds it reads blocklist.txt (next to this script)
# and, when its text differs from what the "blocklist" cache holds, stores
# the text and its digest there. The access checks read the digest (a few
# bytes) on each request, and the list only when it changed.
BLOCKLIST_FILE = File.join(File.dirname(__FILE__), "blocklist.txt")
BLOCKLIST_REFRESH = 2

def refresh_blocklist
  cache = Apache::Cache.named(:blocklist)
  text = File.read(BLOCKLIST_FILE)
  digest = Digest::SHA256.hexdigest(text)
  return if cache["digest"] == digest
  cache["list"] = text # the list first: a check that sees the new digest finds it
  cache["digest"] = digest
end

# A file that cannot be read raises: the error log says so (with this
# file and line), the cache keeps the list read before, the timer goes on.
Apache::Timer.every(BLOCKLIST_REFRESH) { refresh_blocklist }
refresh_blocklist # at once, as the child starts
