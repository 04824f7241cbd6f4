# blocklist_check.rb: refuses (403) the clients whose address is on the
# list that blocklist_timer.rb keeps in the "blocklist" cache. Each thread
# keeps the list as a Hash, made again when the cache's digest changes.
cache = Apache::Cache.named(:blocklist)
digest = cache["digest"]
# (before the timer's first read, there is no digest yet: an empty list)
if $blocklist.nil? || digest != $blocklist_digest
  list = {}
  (cache["list"] || "").each_line do |line|
    address = line.split("#", 2)[0].strip
    list[address] = true unless address.empty?
  end
  $blocklist, $blocklist_digest = list, digest
end
client = Apache::Connection.new.useragent_ip
if $blocklist[client]
  Apache::Request.new.log(Apache::APLOG_INFO, "#{client} is on the block list")
  Apache.return Apache::HTTP_FORBIDDEN
end
