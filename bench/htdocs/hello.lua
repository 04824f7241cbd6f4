-- Hello world as a mod_lua script (AddHandler lua-script .lua).
function handle(r)
  r:puts("hello world!")
end
