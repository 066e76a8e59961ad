#!/usr/bin/env bash
# Checks the documentation against the repository and the binary: Tests/docs/check-docs.sh PATH/TO/chaos
# 1. Every relative link (`[text](target)`, `![alt](target)`, `[ref]: target`) in README.md, docs/ and every other
#    Markdown file of the repository (tracked, or new and not ignored; never .build) resolves: the file exists beside
#    the linking file, and a `#anchor` names a heading of the target (GitHub's slugs, duplicates as -1, -2).
#    Links in fenced code blocks and in code spans are not links. Each broken one: FILE:LINE: broken link TARGET (why).
# 2. Every subcommand and every flag that `chaos --help` and `chaos help SUB…` list (nested subcommands found from each
#    SUBCOMMANDS section) is documented in docs/: a subcommand as the text `chaos SUB`, a flag as the text `--flag`
#    (not a longer flag that starts with it). -h, --help and --version are not checked. Each missing one:
#    undocumented: chaos SUB --flag.
# 3. README.md's Layout section has one bullet per target of Package.swift (`- `Name`: ...`), in Package.swift's order.
#    Each difference: layout: ...
# 4. Proves it can fail: a broken link, a broken anchor and a flag documented only as a longer one must be caught.
# Exit 1 with a summary when anything failed.
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: $0 PATH/TO/chaos" >&2; exit 2; }
chaos="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
[ -x "$chaos" ] || { echo "check-docs: $1 is not an executable" >&2; exit 2; }
cd "$(dirname "$0")/../.."

fail() { echo "check-docs: $*" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The link checker: Markdown files as arguments (paths relative to the current folder, the repository's root);
# prints each broken link, then `LINKS N`; exits 1 when one is broken.
read -r -d '' LINKS <<'EOF' || true
import os, re, sys, unicodedata
from urllib.parse import unquote

FENCE = re.compile(r'^\s*(`{3,}|~{3,})')
INLINE = re.compile(r'!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*(<[^>]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:\s+(?:"[^"]*"|\'[^\']*\'|\([^)]*\)))?\s*\)')
REFDEF = re.compile(r'^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)')
SCHEME = re.compile(r'^[A-Za-z][A-Za-z0-9+.-]*:')
CODESPAN = re.compile(r'(`+)(?:(?!\1).)+?\1')

def prose(lines):
    """(line number, text) of each line outside fenced code blocks."""
    fence = None
    for number, line in enumerate(lines, 1):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
            continue
        if fence is not None:
            if re.match(r'^\s*' + re.escape(fence[0]) + '{%d,}\s*$' % len(fence), line):
                fence = None
            continue
        yield number, line

def slugify(text):
    text = re.sub(r'\s+#+\s*$', '', text.strip())              # a closing sequence of #
    text = re.sub(r'!?\[([^\]]*)\]\([^)]*\)', r'\1', text)       # links and images: their text
    text = re.sub(r'<[^>]+>', '', text)                          # inline HTML
    parts = re.split(r'(`+[^`]*`+)', text)                       # emphasis with _ outside code spans only
    parts = [p if p.startswith('`') else re.sub(r'(?<![\w])(__?)(?=\S)(.+?)(?<=\S)\1(?![\w])', r'\2', p) for p in parts]
    text = ''.join(parts).lower()
    kept = ''.join(c for c in text if c in ' -_' or unicodedata.category(c)[0] in 'LMN' or unicodedata.category(c) == 'Pc')
    return kept.replace(' ', '-')

anchor_cache = {}
def anchors(path):
    if path not in anchor_cache:
        seen, found = {}, set()
        lines = open(path, encoding='utf-8').read().split('\n')
        previous = ''
        for _, line in prose(lines):
            heading = None
            m = re.match(r'^ {0,3}#{1,6}(?:\s+(.*))?$', line)
            if m:
                heading = m.group(1) or ''
            elif re.match(r'^ {0,3}(=+|-+)\s*$', line) and previous.strip() and not re.match(r'^\s*([-*+>|#]|\d+[.)])', previous):
                heading = previous
            previous = line
            for name in re.findall(r'<a\s+(?:name|id)="([^"]+)"', line):
                found.add(name)
            if heading is None:
                continue
            slug = base = slugify(heading)
            while slug in seen:
                seen[base] += 1
                slug = f'{base}-{seen[base]}'
            seen[slug] = 0
            found.add(slug)
        anchor_cache[path] = found
    return anchor_cache[path]

broken, count = 0, 0
for source in sys.argv[1:]:
    lines = open(source, encoding='utf-8').read().split('\n')
    for number, line in prose(lines):
        targets = [m.group(2) for m in INLINE.finditer(CODESPAN.sub('', line))]
        m = REFDEF.match(line)
        if m:
            targets.append(m.group(1))
        for target in targets:
            raw = target[1:-1] if target.startswith('<') else target
            if not raw or SCHEME.match(raw):
                continue                                         # http(s), mailto and other schemes
            count += 1
            path, _, anchor = raw.partition('#')
            path = unquote(path.split('?')[0])
            if not path:
                resolved = source
            elif path.startswith('/'):
                resolved = os.path.normpath(path.lstrip('/'))
            else:
                resolved = os.path.normpath(os.path.join(os.path.dirname(source), path))
            why = None
            if not os.path.exists(resolved):
                why = f'no file {resolved}'
            elif anchor:
                anchor = unquote(anchor)
                if os.path.isdir(resolved):
                    why = f'#{anchor} on a folder'
                elif resolved.endswith('.md'):
                    if anchor.lower() not in {a.lower() for a in anchors(resolved)}:
                        why = f'no heading #{anchor} in {resolved}'
                elif not re.match(r'^L\d+(-L\d+)?$', anchor):
                    why = f'#{anchor} in a file that is not Markdown'
            if why:
                broken += 1
                print(f'{source}:{number}: broken link {raw} ({why})')
print(f'LINKS {count}')
sys.exit(1 if broken else 0)
EOF

# The repository's Markdown files: tracked, or new and not ignored (git); every *.md outside .build* otherwise.
markdown_files() {
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files --cached --others --exclude-standard -- '*.md'
  else
    find . -name '*.md' -not -path './.build*' -not -path './.git/*' | sed 's|^\./||'
  fi | grep -v '^\.build' | sort -u | while IFS= read -r file; do [ ! -f "$file" ] || echo "$file"; done
}

# Whether the text $1 appears in a Markdown file under $2 (default docs/), not followed by more of a flag's name.
documented() {
  local dir=${2:-docs}
  grep -rqE --include='*.md' -e "(^|[^a-z0-9-])$1([^a-z0-9-]|\$)" "$dir"
}

# The subcommands a help text lists (its SUBCOMMANDS section), and the flags (every --name in an option's synopsis).
subcommands_of() { awk '/^SUBCOMMANDS:/ { s = 1; next } s && /^[^ ]/ { s = 0 } s && /^  [a-z]/ { print $1 }'; }
flags_of() {
  awk '/^  -/ {
    n = split($0, word, " ")
    for (i = 1; i <= n; i++) {
      if (word[i] !~ /^(-[A-Za-z],?|--[a-z0-9][a-z0-9-]*(\/--[a-z0-9][a-z0-9-]*)*|<[^>]*>|\.\.\.)$/) break
      m = split(word[i], alt, "/")
      for (j = 1; j <= m; j++) if (alt[j] ~ /^--/) print alt[j]
    }
  }' | sort -u
}

# 1. Links.
mapfile -t files < <(markdown_files)
[ ${#files[@]} -gt 0 ] || fail "no Markdown files found"
status=0
python3 -c "$LINKS" "${files[@]}" >"$tmp/links.out" || status=$?
[ $status -le 1 ] || { cat "$tmp/links.out" >&2; fail "the link checker failed (exit $status)"; }
grep -v '^LINKS ' "$tmp/links.out" || true
links=$(sed -n 's/^LINKS //p' "$tmp/links.out")
broken=$(grep -vc '^LINKS ' "$tmp/links.out" || true)

# 2. Commands and flags, walking the help tree from the root.
commands=0 flags=0 undocumented=0
queue=("")
while [ ${#queue[@]} -gt 0 ]; do
  path=${queue[0]}
  queue=("${queue[@]:1}")
  read -r -a words <<<"$path"
  if [ ${#words[@]} -eq 0 ]; then
    help=$("$chaos" --help 2>&1) || fail "chaos --help failed"
  else
    help=$("$chaos" help "${words[@]}" 2>&1) || fail "chaos help $path failed"
    if ! documented "chaos $path"; then
      echo "undocumented: chaos $path"
      undocumented=$((undocumented + 1))
    fi
  fi
  commands=$((commands + 1))
  while read -r flag; do
    case "$flag" in --help | --version) continue ;; esac
    flags=$((flags + 1))
    if ! documented "$flag"; then
      echo "undocumented: chaos${path:+ $path} $flag"
      undocumented=$((undocumented + 1))
    fi
  done < <(flags_of <<<"$help")
  while read -r sub; do
    [ "$sub" = help ] || queue+=("${path:+$path }$sub")
  done < <(subcommands_of <<<"$help")
done
[ "$commands" -gt 1 ] || fail "chaos --help listed no subcommands (is $1 chaos?)"

# 3. README's Layout against Package.swift's targets.
read -r -d '' LAYOUT <<'EOF' || true
import re, sys
package = open('Package.swift', encoding='utf-8').read()
targets = re.findall(r'\.(?:target|executableTarget|testTarget|systemLibrary|binaryTarget|plugin|macro)\(\s*name:\s*"([^"]+)"',
                     package[max(package.find('targets:'), 0):])
readme = open('README.md', encoding='utf-8').read()
section = re.search(r'^## Layout\n(.*?)(?=^## |\Z)', readme, re.M | re.S)
listed = re.findall(r'^- `([^`]+)`', section.group(1), re.M) if section else []
problems = ['layout: README.md has no Layout section'] if not section else []
problems += [f'layout: README.md lacks target {t} of Package.swift' for t in targets if t not in listed]
problems += [f'layout: README.md lists {t}, which is not a target of Package.swift' for t in listed if t not in targets]
if not problems and listed != targets:
    problems.append('layout: README.md lists the targets in another order than Package.swift: ' + ', '.join(listed))
for problem in problems:
    print(problem)
print(f'TARGETS {len(targets)}')
sys.exit(1 if problems else 0)
EOF
python3 -c "$LAYOUT" >"$tmp/layout.out" || true
grep -v '^TARGETS ' "$tmp/layout.out" || true
targets=$(sed -n 's/^TARGETS //p' "$tmp/layout.out")
layout=$(grep -vc '^TARGETS ' "$tmp/layout.out" || true)
[ "${targets:-0}" -gt 0 ] || fail "found no targets in Package.swift"

# 4. Self-checks: planted faults in a scratch folder must be caught.
mkdir -p "$tmp/self/docs"
cat >"$tmp/self/docs/a.md" <<'EOF'
# A page

## Two: the same (`heading`)

## Two: the same (`heading`)

See [b](b.md#setext-title), [the second](#two-the-same-heading-1), [the image](b.md) and `[not a link](nowhere.md)`.
Broken: [a file](missing.md) and [an anchor](b.md#no-such-heading).

```
[in a fence](also-missing.md)
```

Only the longer flag is here: `--tls-upstream`.
EOF
printf 'Setext title\n============\n' >"$tmp/self/docs/b.md"
(cd "$tmp/self" && python3 -c "$LINKS" docs/a.md docs/b.md) >"$tmp/self.out" 2>&1 && fail "self-check: the planted broken links passed"
grep -q '^docs/a.md:8: broken link missing.md (no file docs/missing.md)$' "$tmp/self.out" ||
  { cat "$tmp/self.out" >&2; fail "self-check: a link to a missing file was not reported"; }
grep -q '^docs/a.md:8: broken link b.md#no-such-heading (no heading #no-such-heading in docs/b.md)$' "$tmp/self.out" ||
  { cat "$tmp/self.out" >&2; fail "self-check: a link to a missing heading was not reported"; }
if [ "$(grep -vc '^LINKS ' "$tmp/self.out")" != 2 ] || ! grep -q '^LINKS 5$' "$tmp/self.out"; then
  cat "$tmp/self.out" >&2
  fail "self-check: expected 5 links and exactly the 2 planted broken ones"
fi
documented --tls-upstream "$tmp/self/docs" || fail "self-check: a documented flag was not found"
! documented --tls "$tmp/self/docs" || fail "self-check: --tls counted as documented by --tls-upstream"

if [ "$broken" -gt 0 ] || [ "$undocumented" -gt 0 ] || [ "$layout" -gt 0 ]; then
  fail "$broken broken link(s) of $links, $undocumented undocumented command(s) or flag(s) of $flags flags in $commands commands," \
    "$layout Layout problem(s) for $targets targets"
fi
echo "docs: $links links, $flags flags in $commands commands, $targets targets in the Layout checked" \
  "(self-check: 2 planted broken links and a flag prefix caught)"
