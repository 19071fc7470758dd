# kctl shell completion, generated from the CLI by `python -m kctl.cli.completions`.
# Do not edit: regenerate after changing commands or options
# (tests/cli/test_completions.py fails while this file is stale).
# Install: source it from ~/.bashrc, or copy it to
# ~/.local/share/bash-completion/completions/kctl (bash-completion loads it on demand).

# _kctl_command PATH: subcommands (subs), options (opts) and options taking a value
# (vopts) of the command PATH ("kctl", "kctl connector", ...).
_kctl_command() {
    case $1 in
        'kctl')
            subs='worker connector plugins dlq topic context logger rebalance group schema'
            opts='--url --context --cacert --insecure --output -o --debug --timeout --install-completion --show-completion --help'
            vopts='--url --context --cacert --output -o --timeout' ;;
        'kctl worker')
            subs='start prepare'
            opts='--help'
            vopts='' ;;
        'kctl worker start')
            subs=''
            opts='--help'
            vopts='' ;;
        'kctl worker prepare')
            subs=''
            opts='--help'
            vopts='' ;;
        'kctl connector')
            subs='list get config status create apply patch pause resume stop delete restart validate offsets'
            opts='--help'
            vopts='' ;;
        'kctl connector list')
            subs=''
            opts='--output -o --help'
            vopts='--output -o' ;;
        'kctl connector get')
            subs=''
            opts='--output -o --help'
            vopts='--output -o' ;;
        'kctl connector config')
            subs=''
            opts='--output -o --help'
            vopts='--output -o' ;;
        'kctl connector status')
            subs=''
            opts='--output -o --metrics --interval --help'
            vopts='--output -o --interval' ;;
        'kctl connector create')
            subs=''
            opts='--wait --initial-state --timeout --output -o --help'
            vopts='--initial-state --timeout --output -o' ;;
        'kctl connector apply')
            subs=''
            opts='--dry-run --wait --timeout --output -o --help'
            vopts='--timeout --output -o' ;;
        'kctl connector patch')
            subs=''
            opts='--dry-run --output -o --help'
            vopts='--output -o' ;;
        'kctl connector pause')
            subs=''
            opts='--output -o --help'
            vopts='--output -o' ;;
        'kctl connector resume')
            subs=''
            opts='--output -o --help'
            vopts='--output -o' ;;
        'kctl connector stop')
            subs=''
            opts='--output -o --help'
            vopts='--output -o' ;;
        'kctl connector delete')
            subs=''
            opts='--output -o --help'
            vopts='--output -o' ;;
        'kctl connector restart')
            subs=''
            opts='--include-tasks --only-failed --task --output -o --help'
            vopts='--task --output -o' ;;
        'kctl connector validate')
            subs=''
            opts='--output -o --help'
            vopts='--output -o' ;;
        'kctl connector offsets')
            subs='get set reset'
            opts='--help'
            vopts='' ;;
        'kctl connector offsets get')
            subs=''
            opts='--output -o --help'
            vopts='--output -o' ;;
        'kctl connector offsets set')
            subs=''
            opts='--output -o --help'
            vopts='--output -o' ;;
        'kctl connector offsets reset')
            subs=''
            opts='--output -o --help'
            vopts='--output -o' ;;
        'kctl plugins')
            subs='list new'
            opts='--help'
            vopts='' ;;
        'kctl plugins list')
            subs=''
            opts='--output -o --local --plugin-path --help'
            vopts='--output -o --plugin-path' ;;
        'kctl plugins new')
            subs=''
            opts='--source --sink --dir --help'
            vopts='--dir' ;;
        'kctl dlq')
            subs='show replay purge'
            opts='--help'
            vopts='' ;;
        'kctl dlq show')
            subs=''
            opts='--limit --output -o --help'
            vopts='--limit --output -o' ;;
        'kctl dlq replay')
            subs=''
            opts='--to --output -o --help'
            vopts='--to --output -o' ;;
        'kctl dlq purge')
            subs=''
            opts='--yes -y --output -o --help'
            vopts='--output -o' ;;
        'kctl topic')
            subs='list describe read'
            opts='--help'
            vopts='' ;;
        'kctl topic list')
            subs=''
            opts='--output -o --help'
            vopts='--output -o' ;;
        'kctl topic describe')
            subs=''
            opts='--connector -c --value-converter --output -o --help'
            vopts='--connector -c --value-converter --output -o' ;;
        'kctl topic read')
            subs=''
            opts='--from-beginning --offset --last --partition -p --max -n --follow -f --connector -c --key-converter --value-converter --output -o --help'
            vopts='--offset --last --partition -p --max -n --connector -c --key-converter --value-converter --output -o' ;;
        'kctl context')
            subs='set use list current delete'
            opts='--help'
            vopts='' ;;
        'kctl context set')
            subs=''
            opts='--url --use --cacert --user --password-stdin --output -o --help'
            vopts='--url --cacert --user --output -o' ;;
        'kctl context use')
            subs=''
            opts='--output -o --help'
            vopts='--output -o' ;;
        'kctl context list')
            subs=''
            opts='--output -o --help'
            vopts='--output -o' ;;
        'kctl context current')
            subs=''
            opts='--output -o --help'
            vopts='--output -o' ;;
        'kctl context delete')
            subs=''
            opts='--output -o --help'
            vopts='--output -o' ;;
        'kctl logger')
            subs='list get set'
            opts='--help'
            vopts='' ;;
        'kctl logger list')
            subs=''
            opts='--output -o --help'
            vopts='--output -o' ;;
        'kctl logger get')
            subs=''
            opts='--output -o --help'
            vopts='--output -o' ;;
        'kctl logger set')
            subs=''
            opts='--output -o --help'
            vopts='--output -o' ;;
        'kctl rebalance')
            subs='explain history'
            opts='--help'
            vopts='' ;;
        'kctl rebalance explain')
            subs=''
            opts='--scenario -s --kind --protocol --workers --connectors --tasks --topics --partitions --join --leave --crash --advance --delay --session-timeout --compare --trace --output -o --width --generation -g --replay --html --help'
            vopts='--scenario -s --kind --protocol --workers --connectors --tasks --topics --partitions --join --leave --crash --advance --delay --session-timeout --output -o --width --generation -g --html' ;;
        'kctl rebalance history')
            subs=''
            opts='--last -n --connector -c --since --output -o --html --width --help'
            vopts='--last -n --connector -c --since --output -o --html --width' ;;
        'kctl group')
            subs='describe'
            opts='--help'
            vopts='' ;;
        'kctl group describe')
            subs=''
            opts='--output -o --help'
            vopts='--output -o' ;;
        'kctl schema')
            subs='list versions show compat config'
            opts='--help'
            vopts='' ;;
        'kctl schema list')
            subs=''
            opts='--deleted --output -o --help'
            vopts='--output -o' ;;
        'kctl schema versions')
            subs=''
            opts='--output -o --help'
            vopts='--output -o' ;;
        'kctl schema show')
            subs=''
            opts='--version -v --output -o --help'
            vopts='--version -v --output -o' ;;
        'kctl schema compat')
            subs=''
            opts='--type --version -v --output -o --help'
            vopts='--type --version -v --output -o' ;;
        'kctl schema config')
            subs=''
            opts='--level --output -o --help'
            vopts='--level --output -o' ;;
        *)
            subs='' opts='' vopts='' ;;
    esac
}

# _kctl_value PATH OPTION: how to complete OPTION's value: kind=choice (from words),
# file or none.
_kctl_value() {
    case "$1 $2" in
        'kctl --output'|'kctl -o')
            kind=choice words='table json yaml' ;;
        'kctl connector list --output'|'kctl connector list -o')
            kind=choice words='table json yaml' ;;
        'kctl connector get --output'|'kctl connector get -o')
            kind=choice words='table json yaml' ;;
        'kctl connector config --output'|'kctl connector config -o')
            kind=choice words='table json yaml' ;;
        'kctl connector status --output'|'kctl connector status -o')
            kind=choice words='table json yaml' ;;
        'kctl connector create --output'|'kctl connector create -o')
            kind=choice words='table json yaml' ;;
        'kctl connector apply --output'|'kctl connector apply -o')
            kind=choice words='table json yaml' ;;
        'kctl connector patch --output'|'kctl connector patch -o')
            kind=choice words='table json yaml' ;;
        'kctl connector pause --output'|'kctl connector pause -o')
            kind=choice words='table json yaml' ;;
        'kctl connector resume --output'|'kctl connector resume -o')
            kind=choice words='table json yaml' ;;
        'kctl connector stop --output'|'kctl connector stop -o')
            kind=choice words='table json yaml' ;;
        'kctl connector delete --output'|'kctl connector delete -o')
            kind=choice words='table json yaml' ;;
        'kctl connector restart --output'|'kctl connector restart -o')
            kind=choice words='table json yaml' ;;
        'kctl connector validate --output'|'kctl connector validate -o')
            kind=choice words='table json yaml' ;;
        'kctl connector offsets get --output'|'kctl connector offsets get -o')
            kind=choice words='table json yaml' ;;
        'kctl connector offsets set --output'|'kctl connector offsets set -o')
            kind=choice words='table json yaml' ;;
        'kctl connector offsets reset --output'|'kctl connector offsets reset -o')
            kind=choice words='table json yaml' ;;
        'kctl plugins list --output'|'kctl plugins list -o')
            kind=choice words='table json yaml' ;;
        'kctl plugins new --dir')
            kind=file ;;
        'kctl dlq show --output'|'kctl dlq show -o')
            kind=choice words='table json yaml' ;;
        'kctl dlq replay --output'|'kctl dlq replay -o')
            kind=choice words='table json yaml' ;;
        'kctl dlq purge --output'|'kctl dlq purge -o')
            kind=choice words='table json yaml' ;;
        'kctl topic list --output'|'kctl topic list -o')
            kind=choice words='table json yaml' ;;
        'kctl topic describe --output'|'kctl topic describe -o')
            kind=choice words='table json yaml' ;;
        'kctl topic read --output'|'kctl topic read -o')
            kind=choice words='table json yaml' ;;
        'kctl context set --output'|'kctl context set -o')
            kind=choice words='table json yaml' ;;
        'kctl context use --output'|'kctl context use -o')
            kind=choice words='table json yaml' ;;
        'kctl context list --output'|'kctl context list -o')
            kind=choice words='table json yaml' ;;
        'kctl context current --output'|'kctl context current -o')
            kind=choice words='table json yaml' ;;
        'kctl context delete --output'|'kctl context delete -o')
            kind=choice words='table json yaml' ;;
        'kctl logger list --output'|'kctl logger list -o')
            kind=choice words='table json yaml' ;;
        'kctl logger get --output'|'kctl logger get -o')
            kind=choice words='table json yaml' ;;
        'kctl logger set --output'|'kctl logger set -o')
            kind=choice words='table json yaml' ;;
        'kctl rebalance explain --scenario'|'kctl rebalance explain -s')
            kind=file ;;
        'kctl rebalance explain --kind')
            kind=choice words='connect consumer' ;;
        'kctl rebalance explain --output'|'kctl rebalance explain -o')
            kind=choice words='table json yaml' ;;
        'kctl rebalance explain --html')
            kind=file ;;
        'kctl rebalance history --output'|'kctl rebalance history -o')
            kind=choice words='table json yaml' ;;
        'kctl rebalance history --html')
            kind=file ;;
        'kctl schema list --output'|'kctl schema list -o')
            kind=choice words='table json yaml' ;;
        'kctl schema versions --output'|'kctl schema versions -o')
            kind=choice words='table json yaml' ;;
        'kctl schema show --output'|'kctl schema show -o')
            kind=choice words='table json yaml' ;;
        'kctl schema compat --output'|'kctl schema compat -o')
            kind=choice words='table json yaml' ;;
        'kctl schema config --output'|'kctl schema config -o')
            kind=choice words='table json yaml' ;;
        *)
            kind=none ;;
    esac
}

# _kctl_argument PATH INDEX: how to complete positional argument INDEX (from 0) of PATH.
_kctl_argument() {
    kind=none
    case $1 in
        'kctl worker start')
            case $2 in
                0) kind=file ;;
                *) kind=file ;;
            esac ;;
        'kctl worker prepare')
            case $2 in
                0) kind=file ;;
            esac ;;
        'kctl connector create')
            case $2 in
                0) kind=file ;;
            esac ;;
        'kctl connector apply')
            case $2 in
                0) kind=file ;;
            esac ;;
        'kctl connector validate')
            case $2 in
                0) kind=file ;;
            esac ;;
        'kctl connector offsets set')
            case $2 in
                1) kind=file ;;
            esac ;;
        'kctl schema compat')
            case $2 in
                1) kind=file ;;
            esac ;;
    esac
}

_kctl() {
    local cur=${COMP_WORDS[COMP_CWORD]} path=kctl word i=1 npos=0 value_of=''
    local subs='' opts='' vopts='' kind=none words=''
    [[ $cur == = ]] && cur=''  # right after `--opt=`: bash splits words at '='
    _kctl_command "$path"
    # Walk the words before the cursor: follow subcommands, skip options' values.
    while (( i < COMP_CWORD )); do
        word=${COMP_WORDS[i]}
        if [[ -n $value_of ]]; then
            [[ $word == = ]] || value_of=''
        elif [[ $word == -?* ]]; then
            [[ " $vopts " == *" $word "* ]] && value_of=$word
        elif [[ " $subs " == *" $word "* ]]; then
            path+=" $word" npos=0
            _kctl_command "$path"
        else
            (( npos++ ))
        fi
        (( i++ ))
    done
    COMPREPLY=()
    if [[ -n $value_of ]]; then
        _kctl_value "$path" "$value_of"
    elif [[ $cur == -* ]]; then
        kind=choice words=$opts
    elif [[ -n $subs ]]; then
        kind=choice words=$subs
    else
        _kctl_argument "$path" "$npos"
    fi
    if [[ $kind == choice ]]; then
        COMPREPLY=($(compgen -W "$words" -- "$cur"))
    fi
    # file: leave COMPREPLY empty so `complete -o default` offers file names;
    # otherwise offer no file names (compopt is bash >= 4).
    [[ $kind == file ]] || compopt +o default 2>/dev/null
    return 0
}

complete -o default -F _kctl kctl
