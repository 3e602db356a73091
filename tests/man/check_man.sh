#!/usr/bin/env bash
# Fails when a man page in man/ (or the bash completion) leaves out something the code has:
#   composerctl.1      every option and positional of `composerctl [COMMAND...] --help`, in the
#                      OPTIONS section (global ones) or the COMMANDS subsection of its command
#   composerd.8        every option of `composerd --help`
#   composer.conf.5    every key composerd's parser accepts (man_conf_keys asks it about every
#                      word of composer_conf.cc), NodeName/DeviceGroup/FabricName options in their
#                      subsections, and the keys the job_submit parser compares
#   spank_composer.8   every plugstack argument and job option (man_plugin_lists prints them
#                      from the plugins' core) and the job_submit keys
#   composerctl.bash-completion   every command and option of composerctl's --help
#   docs/ADMIN.md      the config error form of its troubleshooting table is what composerd prints
# "Documented" means: a .TP/.TQ item of the page, in the section named above, starts with it
# (a key as KEY=, case-insensitive), or a command has a subsection of its own.
#
# Usage: check_man.sh --composerctl BIN --composerd BIN --conf-keys BIN --source DIR
#                     [--plugin-lists BIN]
set -euo pipefail

composerctl="" composerd="" conf_keys="" plugin_lists="" source=""
while (($#)); do
  case $1 in
    --composerctl) composerctl=$2 ;;
    --composerd) composerd=$2 ;;
    --conf-keys) conf_keys=$2 ;;
    --plugin-lists) plugin_lists=$2 ;;
    --source) source=$2 ;;
    *)
      echo "check_man: unknown argument $1" >&2
      exit 2
      ;;
  esac
  shift 2
done
if [[ -z $composerctl || -z $composerd || -z $conf_keys || -z $source ]]; then
  echo "usage: check_man.sh --composerctl BIN --composerd BIN --conf-keys BIN --source DIR [--plugin-lists BIN]" >&2
  exit 2
fi
man=$source/man
failures=0
fail() {
  echo "check_man: $*" >&2
  failures=$((failures + 1))
}

# The items of a page, one a line: SECTION<TAB>SUBSECTION<TAB>item text, with roff's escapes
# for '-' and fonts and the macros' quotes removed. Subsection headings come as items with
# the text "=SS".
items() {
  awk '
    function norm(s) {
      gsub(/\\-/, "-", s); gsub(/\\f[BIRP]/, "", s); gsub(/\\f\(../, "", s)
      gsub(/\\&/, "", s); gsub(/"/, " ", s); gsub(/[ \t]+/, " ", s)
      sub(/^ /, "", s); sub(/ $/, "", s)
      return s
    }
    /^\.SH/ { sh = norm(substr($0, 4)); ss = ""; next }
    /^\.SS/ { ss = norm(substr($0, 4)); print sh "\t" ss "\t=SS"; next }
    /^\.(TP|TQ)/ { tag = 1; next }
    tag && /^\.\\"/ { next }
    tag {
      tag = 0; line = $0
      sub(/^\.[A-Za-z]+[ \t]*/, "", line)
      print sh "\t" ss "\t" norm(line)
    }
  ' "$1"
}

# Whether one of the items (stdin, as items() prints them) starts with WORD: as an option
# ("--limit N", "-S , --start TIME", "--compose-gpus=[MODEL:]N") or, with "key", as KEY=.
has_item() {
  local kind=$1 word=$2
  awk -F'\t' -v kind="$kind" -v word="$word" '
    $3 == "=SS" { next }
    {
      n = split($3, tokens, /[ ,]+/)
      for (i = 1; i <= n; i++) {
        t = tokens[i]
        if (kind == "key") {
          if (tolower(t) ~ "^" tolower(word) "=") found = 1
          break
        }
        if (t !~ /^-/) break
        sub(/=.*/, "", t)
        if (t == word) found = 1
      }
    }
    END { exit found ? 0 : 1 }
  '
}

# The page's source: man/NAME.in (configured at build time) or man/NAME.
page() {
  local f
  for f in "$man/$1.in" "$man/$1"; do
    [[ -f $f ]] && echo "$f" && return 0
  done
  return 1
}

# ---- composerctl ---------------------------------------------------------------------------

# One section of CLI11's help output (Options, Subcommands, Positionals; any case).
help_section() {
  awk -v want="$1" '
    /^[A-Za-z][A-Za-z ]*:$/ { in_section = tolower($0) == tolower(want) ":"; next }
    /^$/ { next }
    in_section { print }
  '
}
help_options() {
  # "-h,--help", "-h,     --help" (CLI11 2.4), "--server TEXT", "--json Excludes: ...": the
  # names before the first word that is not one.
  help_section options | awk '{
    for (i = 1; i <= NF; i++) {
      n = split($i, names, ",")
      for (j = 1; j <= n; j++) {
        if (names[j] == "") continue
        if (names[j] !~ /^--?[A-Za-z0-9][A-Za-z0-9-]*$/) next
        print names[j]
      }
    }
  }'
}
help_commands() { help_section subcommands | awk '/^  [a-z]/ { print $1 }'; }
help_positionals() { help_section positionals | awk '/^  [A-Za-z]/ { print $1 }'; }

ctl_page=$(page composerctl.1) || fail "composerctl.1: no such page in $man"
completion=$source/contrib/composerctl.bash-completion
[[ -f $completion ]] || fail "$completion: missing"
ctl_items=""
[[ -n $ctl_page ]] && ctl_items=$(items "$ctl_page")
in_completion() { grep -Eq -- "(^|[^A-Za-z0-9_-])$1([^A-Za-z0-9_-]|\$)" "$completion"; }

checked_commands=0
checked_options=0
walk() {
  local help
  help=$("$composerctl" "$@" --help) || {
    fail "composerctl $* --help failed"
    return
  }
  local path="$*" opts cmds positionals o c p
  opts=$(help_options <<<"$help")
  cmds=$(help_commands <<<"$help")
  positionals=$(help_positionals <<<"$help")
  if [[ -z $path ]]; then
    [[ -n $opts && -n $cmds ]] || fail "composerctl --help: found no options or no commands; has its format changed?"
    for o in $opts; do
      checked_options=$((checked_options + 1))
      has_item option "$o" < <(awk -F'\t' '$1 == "OPTIONS"' <<<"$ctl_items") ||
        fail "composerctl.1: option $o (composerctl --help) is not an item of OPTIONS"
      in_completion "$o" || fail "composerctl.bash-completion: option $o is missing"
    done
  else
    checked_commands=$((checked_commands + 1))
    # The subsections of this command and of its subcommands: those whose heading starts with
    # the command path ("devices drain ID --reason TEXT": devices drain; "devices list [--type
    # ...": devices list and devices).
    local sections
    sections=$(awk -F'\t' -v path="$path" '$1 == "COMMANDS" {
      n = split($2, w, " "); p = ""
      for (i = 1; i <= n && w[i] ~ /^[a-z][a-z-]*$/; i++) p = p (p == "" ? "" : " ") w[i]
      if (p == path || index(p, path " ") == 1) print
    }' <<<"$ctl_items")
    if [[ -z $sections ]]; then
      fail "composerctl.1: command '$path' has no subsection in COMMANDS"
    fi
    for o in $opts; do
      [[ $o == -h || $o == --help ]] && continue
      checked_options=$((checked_options + 1))
      has_item option "$o" <<<"$sections" ||
        fail "composerctl.1: option $o of 'composerctl $path' is not an item of its subsection"
      in_completion "$o" || fail "composerctl.bash-completion: option $o of '$path' is missing"
    done
    for p in $positionals; do
      awk -F'\t' '$3 == "=SS" { print $2 }' <<<"$sections" | grep -qw -- "$p" ||
        fail "composerctl.1: argument $p of 'composerctl $path' is not in its subsection's heading"
    done
    in_completion "${path##* }" || fail "composerctl.bash-completion: command '$path' is missing"
  fi
  for c in $cmds; do
    walk "$@" "$c"
  done
}
if [[ -n $ctl_page ]]; then
  walk
  echo "check_man: composerctl.1: $checked_commands commands, $checked_options options"
fi

# ---- composerd -----------------------------------------------------------------------------

if ! d_page=$(page composerd.8); then
  fail "composerd.8: no such page in $man"
else
  d_opts=$("$composerd" --help | help_options)
  [[ -n $d_opts ]] || fail "composerd --help: found no options; has its format changed?"
  d_items=$(items "$d_page" | awk -F'\t' '$1 == "OPTIONS"')
  for o in $d_opts; do
    has_item option "$o" <<<"$d_items" || fail "composerd.8: option $o (composerd --help) is not an item of OPTIONS"
  done
  echo "check_man: composerd.8: $(wc -w <<<"$d_opts") options"
fi

# ---- composer.conf -------------------------------------------------------------------------

config_cc=$source/composer/setup/src/composer_conf.cc
submit_cc=$source/slurm-plugin/core/src/submit_config.cc
# The keys both read (composer/config): composerd's and the job_submit plugin's.
shared_cc=$source/composer/config/src/shared_keys.cc
# The keys the job_submit plugin reads: the shared ones its parser compares (lower case) and
# the rows of its table of settings ({"JobSubmit...", ...}), lower-cased.
submit_keys=$(grep -ohE 'key == "[a-z]+"|\{"JobSubmit[A-Za-z]+"' "$submit_cc" "$shared_cc" |
  sed -E 's/.*"(.*)"/\1/' | tr '[:upper:]' '[:lower:]' | sort -u)
[[ $(grep -c '^jobsubmit' <<<"$submit_keys") -ge 1 ]] ||
  fail "$submit_cc: found no {\"JobSubmit...\"} rows of its table of settings; has the parser changed?"

if ! c_page=$(page composer.conf.5); then
  fail "composer.conf.5: no such page in $man"
else
  c_items=$(items "$c_page")
  # Every word literal of the two files, lower-cased: the tables spell their keys as the
  # documentation does (ListenPort, Url).
  conf_keys_found=$(grep -ohE '"[A-Za-z][A-Za-z0-9_]*"' "$config_cc" "$shared_cc" | tr -d '"' |
    tr '[:upper:]' '[:lower:]' | sort -u | "$conf_keys")
  [[ $(grep -c '^top ' <<<"$conf_keys_found") -ge 10 ]] ||
    fail "man_conf_keys found fewer than 10 composer.conf keys; has the parser changed?"
  n=0
  while read -r context key; do
    n=$((n + 1))
    case $context in
      top)
        # An item of its own outside the object subsections, or (object lines) a subsection
        # named after it.
        awk -F'\t' '$2 !~ /^(NodeName|DeviceGroup|FabricName)/' <<<"$c_items" | has_item key "$key" ||
          awk -F'\t' -v k="$key" '$3 == "=SS" && tolower($2) ~ "^" k "( |$)" { f = 1 } END { exit !f }' <<<"$c_items" ||
          fail "composer.conf.5: key $key (accepted by composerd's parser) is not documented"
        ;;
      *)
        awk -F'\t' -v c="$context" 'index($2, c) == 1' <<<"$c_items" | has_item key "$key" ||
          fail "composer.conf.5: $context option $key (accepted by composerd's parser) is not an item of the '$context lines' subsection"
        ;;
    esac
  done <<<"$conf_keys_found"
  for key in $submit_keys; do
    n=$((n + 1))
    awk -F'\t' '$1 == "JOB_SUBMIT SETTINGS"' <<<"$c_items" | has_item key "$key" ||
      fail "composer.conf.5: job_submit key $key is not an item of JOB_SUBMIT SETTINGS"
  done
  echo "check_man: composer.conf.5: $n keys and options"
fi

# ---- docs/ADMIN.md's troubleshooting table --------------------------------------------------

# The config error row shows the form composerd prints for a bad line ("<file> line <n>: ").
admin=$source/docs/ADMIN.md
bad_conf=$(mktemp)
printf 'Fabric=sim\nColour=blue\n' >"$bad_conf"
printed=$("$composerd" --check --config "$bad_conf" 2>&1 >/dev/null | head -n 1 || true)
rm -f "$bad_conf"
if [[ $printed != "composerd: error: $bad_conf line 2: "* ]]; then
  fail "composerd --check on a bad line 2 printed '$printed', not 'composerd: error: FILE line 2: ...'"
elif ! grep -qF "\`composerd: error: <file> line <n>: ...\`" "$admin"; then
  fail "docs/ADMIN.md: the troubleshooting table does not show 'composerd: error: <file> line <n>: ...' as composerd prints it ('$printed')"
fi

# ---- the plugins ---------------------------------------------------------------------------

if [[ -z $plugin_lists ]]; then
  echo "check_man: the plugins are not built; spank_composer.8 not checked"
elif ! s_page=$(page spank_composer.8); then
  fail "spank_composer.8: no such page in $man"
else
  s_items=$(items "$s_page")
  args=$("$plugin_lists" plugstack) || fail "man_plugin_lists plugstack failed"
  options=$("$plugin_lists" options) || fail "man_plugin_lists options failed"
  [[ -n $args && -n $options ]] || fail "man_plugin_lists printed no arguments or no options"
  for a in $args; do
    awk -F'\t' '$1 == "PLUGSTACK ARGUMENTS"' <<<"$s_items" | has_item key "$a" ||
      fail "spank_composer.8: plugstack argument $a is not an item of PLUGSTACK ARGUMENTS"
  done
  for o in $options; do
    awk -F'\t' '$1 == "JOB OPTIONS"' <<<"$s_items" | has_item option "$o" ||
      fail "spank_composer.8: job option $o is not an item of JOB OPTIONS"
  done
  for key in $submit_keys; do
    awk -F'\t' '$1 == "JOB_SUBMIT SETTINGS"' <<<"$s_items" | has_item key "$key" ||
      fail "spank_composer.8: job_submit key $key is not an item of JOB_SUBMIT SETTINGS"
  done
  echo "check_man: spank_composer.8: $(wc -w <<<"$args") plugstack arguments, $(wc -w <<<"$options") job options, $(wc -w <<<"$submit_keys") job_submit keys"
fi

if ((failures)); then
  echo "check_man: $failures missing" >&2
  exit 1
fi
echo "check_man: every option, key and argument is documented"
