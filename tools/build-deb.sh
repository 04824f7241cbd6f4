#!/bin/sh
# tools/build-deb.sh APXS MRUBY_MODE MRUBY_LIB: builds
# libapache2-mod-mruby_VERSION_ARCH.deb in the current directory (the top of
# the tree, after make) with dpkg-deb, from mod_mruby.so, packaging/deb/ and
# the documentation. `make deb` runs it. Prints the package's file name.
#
# The dependencies are found, not written down: the apache2-api-* virtual
# package from what the installed apache2-bin provides (checked against
# the module magic number of the headers the module was built with), the
# shared libraries from dpkg-shlibdeps. libmruby is linked statically, so
# it is no dependency; Built-Using names the mruby source it came from.
# python3 is written down: /usr/bin/mod_mruby-test, the test kit, runs on it.
set -eu

apxs=$1
mruby_mode=$2
mruby_lib=$3

pkg=libapache2-mod-mruby
version=$(sed -n 's/^#define MM_MODULE_VERSION "\(.*\)"/\1/p' src/module/mod_mruby.h)
arch=$(dpkg --print-architecture)
maintainer=${DEB_MAINTAINER:-mod_mruby developers <dev@mod-mruby.invalid>}
stage=build/deb
root=$stage/$pkg
doc=$root/usr/share/doc/$pkg
modules_dir=$($apxs -q LIBEXECDIR)
deb=${pkg}_${version}_$arch.deb

fail() {
	echo "tools/build-deb.sh: $*" >&2
	exit 1
}

# Dates in the package (changelog, file times) are the last commit's, so
# that the same tree gives the same package.
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
	SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || date +%s)
fi
export SOURCE_DATE_EPOCH

rm -rf "$stage"
mkdir -p "$root/DEBIAN" "$doc"

# --------------------------------------------------------------- files
install -D -m 0644 mod_mruby.so "$root$modules_dir/mod_mruby.so"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$root$modules_dir/mod_mruby.so"
mkdir -p "$root/etc/apache2/mods-available"
sed "s|@MODULES_DIR@|$modules_dir|" packaging/deb/mruby.load.in >"$root/etc/apache2/mods-available/mruby.load"
cp packaging/deb/mruby.conf "$root/etc/apache2/mods-available/mruby.conf"
# The test kit for users' scripts, its default module the installed one.
install -D -m 0755 tools/mod_mruby-test "$root/usr/bin/mod_mruby-test"
sed -i -e "s|^MODULES_DIR = .*|MODULES_DIR = \"$modules_dir\"|" -e 's|^FROM_TREE = True$|FROM_TREE = False|' \
	"$root/usr/bin/mod_mruby-test"
grep -q "^MODULES_DIR = \"$modules_dir\"$" "$root/usr/bin/mod_mruby-test" &&
	grep -q '^FROM_TREE = False$' "$root/usr/bin/mod_mruby-test" ||
	fail "tools/mod_mruby-test: MODULES_DIR or FROM_TREE not found to set"
mkdir -p "$root/usr/share/man/man1"
gzip -9n <packaging/deb/mod_mruby-test.1 >"$root/usr/share/man/man1/mod_mruby-test.1.gz"

# The documentation keeps the tree's layout, so the links between pages
# work where it is installed.
cp README.md "$doc/"
cp -r docs examples "$doc/"
cp packaging/deb/copyright "$doc/copyright"
install -D -m 0644 packaging/deb/lintian-overrides "$root/usr/share/lintian/overrides/$pkg"
{
	printf '%s (%s) unstable; urgency=medium\n\n' "$pkg" "$version"
	printf '  * mod_mruby %s, packaged from its source tree.\n\n' "$version"
	printf ' -- %s  %s\n' "$maintainer" "$(date -u -R -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n >"$doc/changelog.gz"

for script in postinst prerm postrm; do
	install -m 0755 "packaging/deb/$script" "$root/DEBIAN/$script"
done
printf '/etc/apache2/mods-available/mruby.%s\n' load conf >"$root/DEBIAN/conffiles"
find "$root" -type d -exec chmod 0755 {} +
find "$root" -type f ! -path "$root/DEBIAN/*" ! -path "$root/usr/bin/*" -exec chmod 0644 {} +

# --------------------------------------------------------- dependencies
so=$root$modules_dir/mod_mruby.so
if objdump -p "$so" | grep -q 'NEEDED.*libmruby'; then
	fail "mod_mruby.so links libmruby dynamically; the package expects it linked in"
fi

# apache2-bin provides apache2-api-MMN (and an -openssl variant for
# modules that use its OpenSSL, which this one does not).
api=$(dpkg-query -W -f='${Provides}' apache2-bin | tr ',' '\n' | sed -n 's/^ *\(apache2-api-[0-9]*\) *$/\1/p')
[ -n "$api" ] || fail "the installed apache2-bin provides no apache2-api-* package"
mmn=$(sed -n 's/^#define MODULE_MAGIC_NUMBER_MAJOR \([0-9]*\).*/\1/p' "$($apxs -q INCLUDEDIR)/ap_mmn.h")
[ "$api" = "apache2-api-$mmn" ] ||
	fail "apache2-bin provides $api but the module was built with headers of API $mmn"

# dpkg-shlibdeps wants to run in a source tree: a minimal one in $stage.
mkdir -p "$stage/debian"
printf 'Source: mod-mruby\n\nPackage: %s\nArchitecture: any\n' "$pkg" >"$stage/debian/control"
shlibs=$(cd "$stage" && dpkg-shlibdeps -O "${so#"$stage"/}" | sed -n 's/^shlibs:Depends=//p')
[ -n "$shlibs" ] || fail "dpkg-shlibdeps found no library dependencies"

built_using=
if [ "$mruby_mode" = system ]; then
	lib_pkg=$(dpkg-query -S "$(readlink -f "$mruby_lib")" 2>/dev/null | sed -n '1s/:.*//p')
	if [ -n "$lib_pkg" ]; then
		built_using=$(dpkg-query -W -f='${source:Package} (= ${source:Version})' "$lib_pkg")
	fi
fi

# ------------------------------------------------------------- control
size=$(du -k -s --exclude=DEBIAN "$root" | cut -f1)
sed -e "s|@VERSION@|$version|" -e "s|@ARCH@|$arch|" -e "s|@MAINTAINER@|$maintainer|" \
	-e "s|@INSTALLED_SIZE@|$size|" -e "s|@DEPENDS@|$api, $shlibs, python3|" \
	packaging/deb/control.in >"$root/DEBIAN/control"
if [ -n "$built_using" ]; then
	sed -i "/^Depends:/a Built-Using: $built_using" "$root/DEBIAN/control"
fi
(cd "$root" && find . -type f ! -path './DEBIAN/*' | LC_ALL=C sort | sed 's|^\./||' |
	xargs md5sum) >"$root/DEBIAN/md5sums"
chmod 0644 "$root/DEBIAN/control" "$root/DEBIAN/conffiles" "$root/DEBIAN/md5sums"
find "$root" -newermt "@$SOURCE_DATE_EPOCH" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
