# Hello world as a ModPerl::Registry script.
print "Content-Type: text/plain\n\n";
print "hello world!";
