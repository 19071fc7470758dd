# kctl shell completion, generated from the CLI by `python -m kctl.cli.completions`.
# Do not edit: regenerate after changing commands or options
# (tests/cli/test_completions.py fails while this file is stale).
# Install: copy it to ~/.config/fish/completions/kctl.fish

function __kctl_subcommands --description 'Subcommands of the kctl command path in argv'
    switch "$argv"
        case ''
            printf '%s\n' worker connector plugins dlq topic context logger rebalance group schema
        case 'worker'
            printf '%s\n' start prepare
        case 'connector'
            printf '%s\n' list get config status create apply patch pause resume stop delete restart validate offsets
        case 'connector offsets'
            printf '%s\n' get set reset
        case 'plugins'
            printf '%s\n' list new
        case 'dlq'
            printf '%s\n' show replay purge
        case 'topic'
            printf '%s\n' list describe read
        case 'context'
            printf '%s\n' set use list current delete
        case 'logger'
            printf '%s\n' list get set
        case 'rebalance'
            printf '%s\n' explain history
        case 'group'
            printf '%s\n' describe
        case 'schema'
            printf '%s\n' list versions show compat config
    end
end

function __kctl_value_options --description 'Options of the kctl command path in argv that take a value'
    switch "$argv"
        case ''
            printf '%s\n' --url --context --cacert --output -o --timeout
        case 'connector list'
            printf '%s\n' --output -o
        case 'connector get'
            printf '%s\n' --output -o
        case 'connector config'
            printf '%s\n' --output -o
        case 'connector status'
            printf '%s\n' --output -o --interval
        case 'connector create'
            printf '%s\n' --initial-state --timeout --output -o
        case 'connector apply'
            printf '%s\n' --timeout --output -o
        case 'connector patch'
            printf '%s\n' --output -o
        case 'connector pause'
            printf '%s\n' --output -o
        case 'connector resume'
            printf '%s\n' --output -o
        case 'connector stop'
            printf '%s\n' --output -o
        case 'connector delete'
            printf '%s\n' --output -o
        case 'connector restart'
            printf '%s\n' --task --output -o
        case 'connector validate'
            printf '%s\n' --output -o
        case 'connector offsets get'
            printf '%s\n' --output -o
        case 'connector offsets set'
            printf '%s\n' --output -o
        case 'connector offsets reset'
            printf '%s\n' --output -o
        case 'plugins list'
            printf '%s\n' --output -o --plugin-path
        case 'plugins new'
            printf '%s\n' --dir
        case 'dlq show'
            printf '%s\n' --limit --output -o
        case 'dlq replay'
            printf '%s\n' --to --output -o
        case 'dlq purge'
            printf '%s\n' --output -o
        case 'topic list'
            printf '%s\n' --output -o
        case 'topic describe'
            printf '%s\n' --connector -c --value-converter --output -o
        case 'topic read'
            printf '%s\n' --offset --last --partition -p --max -n --connector -c --key-converter --value-converter --output -o
        case 'context set'
            printf '%s\n' --url --cacert --user --output -o
        case 'context use'
            printf '%s\n' --output -o
        case 'context list'
            printf '%s\n' --output -o
        case 'context current'
            printf '%s\n' --output -o
        case 'context delete'
            printf '%s\n' --output -o
        case 'logger list'
            printf '%s\n' --output -o
        case 'logger get'
            printf '%s\n' --output -o
        case 'logger set'
            printf '%s\n' --output -o
        case 'rebalance explain'
            printf '%s\n' --scenario -s --kind --protocol --workers --connectors --tasks --topics --partitions --join --leave --crash --advance --delay --session-timeout --output -o --width --generation -g --html
        case 'rebalance history'
            printf '%s\n' --last -n --connector -c --since --output -o --html --width
        case 'group describe'
            printf '%s\n' --output -o
        case 'schema list'
            printf '%s\n' --output -o
        case 'schema versions'
            printf '%s\n' --output -o
        case 'schema show'
            printf '%s\n' --version -v --output -o
        case 'schema compat'
            printf '%s\n' --type --version -v --output -o
        case 'schema config'
            printf '%s\n' --level --output -o
    end
end

# Prints the number of positional words after the last subcommand, then the command path
# (one word a line), of the command line before the cursor.
function __kctl_walk --description 'Where the cursor is in the kctl command tree'
    set -l words (commandline -opc)
    set -e words[1]
    set -l path
    set -l npos 0
    set -l value 0
    for word in $words
        if test $value = 1
            set value 0
        else if string match -q -- '-?*' $word
            contains -- $word (__kctl_value_options $path); and set value 1
        else if contains -- $word (__kctl_subcommands $path)
            set -a path $word
            set npos 0
        else
            set npos (math $npos + 1)
        end
    end
    printf '%s\n' $npos $path
end

function __kctl_at --description 'True when the kctl command path is argv'
    set -l w (__kctl_walk)
    set -e w[1]
    test "$w" = "$argv"
end

# __kctl_arg N PATH...: the cursor is on positional argument N (from 0; N+ for N or later).
function __kctl_arg --description 'True when the cursor is on a positional argument'
    set -l index $argv[1]
    set -e argv[1]
    set -l w (__kctl_walk)
    set -l npos $w[1]
    set -e w[1]
    test "$w" = "$argv"; or return 1
    if string match -q -- '*+' $index
        test $npos -ge (string trim -r -c + -- $index)
    else
        test $npos -eq $index
    end
end

# No file names unless a parameter takes one (-F below).
complete -c kctl -f

# kctl
complete -c kctl -n '__kctl_at' -a worker -d 'Run a worker.'
complete -c kctl -n '__kctl_at' -a connector -d 'Manage connectors on a worker.'
complete -c kctl -n '__kctl_at' -a plugins -d 'Connector plugins the worker knows.'
complete -c kctl -n '__kctl_at' -a dlq -d 'A connector\'s dead letter queue.'
complete -c kctl -n '__kctl_at' -a topic -d 'Look inside topics: list, describe, read records.'
complete -c kctl -n '__kctl_at' -a context -d 'Named worker URLs (kcctl\'s contexts).'
complete -c kctl -n '__kctl_at' -a logger -d 'A worker\'s log levels at run time (KIP-495).'
complete -c kctl -n '__kctl_at' -a rebalance -d 'Simulate Kafka Connect and consumer group rebalances and explain every round.'
complete -c kctl -n '__kctl_at' -a group -d 'Describe the worker group and sink connectors\' consumer groups.'
complete -c kctl -n '__kctl_at' -a schema -d 'Schemas in the worker\'s Schema Registry (Confluent\'s API).'
complete -c kctl -n '__kctl_at' -l url -x -d 'Worker REST URL [default: the current context\'s, else http://127.0.0.1:8083]'
complete -c kctl -n '__kctl_at' -l context -x -d 'Use this context\'s URL.'
complete -c kctl -n '__kctl_at' -l cacert -x -d 'CA certificate(s) (PEM) that signed an https worker\'s certificate [default: the context...'
complete -c kctl -n '__kctl_at' -l insecure -d 'Do not verify an https worker\'s certificate.'
complete -c kctl -n '__kctl_at' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml for every command'
complete -c kctl -n '__kctl_at' -l debug -d 'Show tracebacks on errors.'
complete -c kctl -n '__kctl_at' -l timeout -x -d 'Seconds to keep retrying a request a cluster refuses while it rebalances (409); 0 answe...'
complete -c kctl -n '__kctl_at' -l install-completion -d 'Install completion for the current shell.'
complete -c kctl -n '__kctl_at' -l show-completion -d 'Show completion for the current shell, to copy it or customize the installation.'
complete -c kctl -n '__kctl_at' -l help -d 'Show this message and exit.'

# kctl worker
complete -c kctl -n '__kctl_at worker' -a start -d 'Start a worker in the foreground: standalone (embedded defaults without CONFIG), or a'
complete -c kctl -n '__kctl_at worker' -a prepare -d 'Record Spark\'s class data so this machine\'s workers start their JVM in about half the'
complete -c kctl -n '__kctl_at worker' -l help -d 'Show this message and exit.'

# kctl worker start
complete -c kctl -n '__kctl_at worker start' -l help -d 'Show this message and exit.'
complete -c kctl -n '__kctl_arg 0 worker start' -F
complete -c kctl -n '__kctl_arg 1+ worker start' -F

# kctl worker prepare
complete -c kctl -n '__kctl_at worker prepare' -l help -d 'Show this message and exit.'
complete -c kctl -n '__kctl_arg 0 worker prepare' -F

# kctl connector
complete -c kctl -n '__kctl_at connector' -a list -d 'List connectors with their states.'
complete -c kctl -n '__kctl_at connector' -a get -d 'Show a connector\'s config and tasks.'
complete -c kctl -n '__kctl_at connector' -a config -d 'Show a connector\'s config.'
complete -c kctl -n '__kctl_at connector' -a status -d 'Connector and task states, worker ids and failure traces.'
complete -c kctl -n '__kctl_at connector' -a create -d 'Create a connector.'
complete -c kctl -n '__kctl_at connector' -a apply -d 'Create or update a connector, showing the changed keys.'
complete -c kctl -n '__kctl_at connector' -a patch -d 'Change some keys of a connector\'s config, showing the changed keys.'
complete -c kctl -n '__kctl_at connector' -a pause -d 'Pause a connector and its tasks.'
complete -c kctl -n '__kctl_at connector' -a resume -d 'Resume a paused connector.'
complete -c kctl -n '__kctl_at connector' -a stop -d 'Stop a connector: its tasks end, its config stays.'
complete -c kctl -n '__kctl_at connector' -a delete -d 'Delete a connector.'
complete -c kctl -n '__kctl_at connector' -a restart -d 'Restart a connector (and its tasks), or one task.'
complete -c kctl -n '__kctl_at connector' -a validate -d 'Validate a connector config; per-field errors as a table.'
complete -c kctl -n '__kctl_at connector' -a offsets -d 'Read and change a connector\'s offsets.'
complete -c kctl -n '__kctl_at connector' -l help -d 'Show this message and exit.'

# kctl connector list
complete -c kctl -n '__kctl_at connector list' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at connector list' -l help -d 'Show this message and exit.'

# kctl connector get
complete -c kctl -n '__kctl_at connector get' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at connector get' -l help -d 'Show this message and exit.'

# kctl connector config
complete -c kctl -n '__kctl_at connector config' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at connector config' -l help -d 'Show this message and exit.'

# kctl connector status
complete -c kctl -n '__kctl_at connector status' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at connector status' -l metrics -d 'Also record counts and rates per task (two scrapes of /metrics, --interval apart).'
complete -c kctl -n '__kctl_at connector status' -l interval -x -d 'Seconds between the scrapes.'
complete -c kctl -n '__kctl_at connector status' -l help -d 'Show this message and exit.'

# kctl connector create
complete -c kctl -n '__kctl_at connector create' -l wait -d 'Show progress until RUNNING or FAILED.'
complete -c kctl -n '__kctl_at connector create' -l initial-state -x -d 'RUNNING, PAUSED or STOPPED'
complete -c kctl -n '__kctl_at connector create' -l timeout -x -d 'Seconds --wait waits.'
complete -c kctl -n '__kctl_at connector create' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at connector create' -l help -d 'Show this message and exit.'
complete -c kctl -n '__kctl_arg 0 connector create' -F

# kctl connector apply
complete -c kctl -n '__kctl_at connector apply' -l dry-run -d 'Show the changes and validate; write nothing.'
complete -c kctl -n '__kctl_at connector apply' -l wait -d 'Show progress until RUNNING or FAILED.'
complete -c kctl -n '__kctl_at connector apply' -l timeout -x -d 'Seconds --wait waits.'
complete -c kctl -n '__kctl_at connector apply' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at connector apply' -l help -d 'Show this message and exit.'
complete -c kctl -n '__kctl_arg 0 connector apply' -F

# kctl connector patch
complete -c kctl -n '__kctl_at connector patch' -l dry-run -d 'Show the changes and validate; write nothing.'
complete -c kctl -n '__kctl_at connector patch' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at connector patch' -l help -d 'Show this message and exit.'

# kctl connector pause
complete -c kctl -n '__kctl_at connector pause' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at connector pause' -l help -d 'Show this message and exit.'

# kctl connector resume
complete -c kctl -n '__kctl_at connector resume' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at connector resume' -l help -d 'Show this message and exit.'

# kctl connector stop
complete -c kctl -n '__kctl_at connector stop' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at connector stop' -l help -d 'Show this message and exit.'

# kctl connector delete
complete -c kctl -n '__kctl_at connector delete' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at connector delete' -l help -d 'Show this message and exit.'

# kctl connector restart
complete -c kctl -n '__kctl_at connector restart' -l include-tasks -d 'Restart its tasks too.'
complete -c kctl -n '__kctl_at connector restart' -l only-failed -d 'Only what is FAILED (with --include-tasks: only failed tasks).'
complete -c kctl -n '__kctl_at connector restart' -l task -x -d 'Restart only this task.'
complete -c kctl -n '__kctl_at connector restart' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at connector restart' -l help -d 'Show this message and exit.'

# kctl connector validate
complete -c kctl -n '__kctl_at connector validate' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at connector validate' -l help -d 'Show this message and exit.'
complete -c kctl -n '__kctl_arg 0 connector validate' -F

# kctl connector offsets
complete -c kctl -n '__kctl_at connector offsets' -a get -d 'Committed offsets of a connector.'
complete -c kctl -n '__kctl_at connector offsets' -a set -d 'Alter offsets of a STOPPED connector.'
complete -c kctl -n '__kctl_at connector offsets' -a reset -d 'Forget all offsets of a STOPPED connector.'
complete -c kctl -n '__kctl_at connector offsets' -l help -d 'Show this message and exit.'

# kctl connector offsets get
complete -c kctl -n '__kctl_at connector offsets get' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at connector offsets get' -l help -d 'Show this message and exit.'

# kctl connector offsets set
complete -c kctl -n '__kctl_at connector offsets set' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at connector offsets set' -l help -d 'Show this message and exit.'
complete -c kctl -n '__kctl_arg 1 connector offsets set' -F

# kctl connector offsets reset
complete -c kctl -n '__kctl_at connector offsets reset' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at connector offsets reset' -l help -d 'Show this message and exit.'

# kctl plugins
complete -c kctl -n '__kctl_at plugins' -a list -d 'Connector plugins the worker can run.'
complete -c kctl -n '__kctl_at plugins' -a new -d 'Write a pip-installable connector project: pyproject with the kctl.connectors entry'
complete -c kctl -n '__kctl_at plugins' -l help -d 'Show this message and exit.'

# kctl plugins list
complete -c kctl -n '__kctl_at plugins list' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at plugins list' -l local -d 'The plugins this Python finds (entry points, --plugin-path), without a worker; plugins...'
complete -c kctl -n '__kctl_at plugins list' -l plugin-path -x -d 'A plugin.path directory (with --local).'
complete -c kctl -n '__kctl_at plugins list' -l help -d 'Show this message and exit.'

# kctl plugins new
complete -c kctl -n '__kctl_at plugins new' -l source -d 'A source connector (the default).'
complete -c kctl -n '__kctl_at plugins new' -l sink -d 'A sink connector.'
complete -c kctl -n '__kctl_at plugins new' -l dir -r -F -d 'Where the project\'s directory goes.'
complete -c kctl -n '__kctl_at plugins new' -l help -d 'Show this message and exit.'

# kctl dlq
complete -c kctl -n '__kctl_at dlq' -a show -d 'Records a connector rejected: when, stage, exception, origin, payload preview.'
complete -c kctl -n '__kctl_at dlq' -a replay -d 'Re-send a connector\'s rejected records (e.g. after fixing a transform); exits 1 when'
complete -c kctl -n '__kctl_at dlq' -a purge -d 'Clear a connector\'s DLQ (e.g. after a replay): later shows and replays start after'
complete -c kctl -n '__kctl_at dlq' -l help -d 'Show this message and exit.'

# kctl dlq show
complete -c kctl -n '__kctl_at dlq show' -l limit -x -d 'Most records shown.'
complete -c kctl -n '__kctl_at dlq show' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at dlq show' -l help -d 'Show this message and exit.'

# kctl dlq replay
complete -c kctl -n '__kctl_at dlq replay' -l to -x -d 'Send to this topic instead of the original.'
complete -c kctl -n '__kctl_at dlq replay' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at dlq replay' -l help -d 'Show this message and exit.'

# kctl dlq purge
complete -c kctl -n '__kctl_at dlq purge' -l yes -s y -d 'Do not ask for confirmation.'
complete -c kctl -n '__kctl_at dlq purge' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at dlq purge' -l help -d 'Show this message and exit.'

# kctl topic
complete -c kctl -n '__kctl_at topic' -a list -d 'Every topic of the worker\'s log, with its partition count.'
complete -c kctl -n '__kctl_at topic' -a describe -d 'Partitions with start and end offsets, and the value schemas seen (in the first and'
complete -c kctl -n '__kctl_at topic' -a read -d 'Records with partition, offset, timestamp, headers, key and value, decoded by the'
complete -c kctl -n '__kctl_at topic' -l help -d 'Show this message and exit.'

# kctl topic list
complete -c kctl -n '__kctl_at topic list' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at topic list' -l help -d 'Show this message and exit.'

# kctl topic describe
complete -c kctl -n '__kctl_at topic describe' -l connector -s c -x -d 'Decode with this connector\'s converters.'
complete -c kctl -n '__kctl_at topic describe' -l value-converter -x -d 'Decode values with this converter.'
complete -c kctl -n '__kctl_at topic describe' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at topic describe' -l help -d 'Show this message and exit.'

# kctl topic read
complete -c kctl -n '__kctl_at topic read' -l from-beginning -d 'Read each partition from its start (the default).'
complete -c kctl -n '__kctl_at topic read' -l offset -x -d 'Read each partition from this offset.'
complete -c kctl -n '__kctl_at topic read' -l last -x -d 'Read the last N records of each partition.'
complete -c kctl -n '__kctl_at topic read' -l partition -s p -x -d 'Only this partition.'
complete -c kctl -n '__kctl_at topic read' -l max -s n -x -d 'Stop after this many records.'
complete -c kctl -n '__kctl_at topic read' -l follow -s f -d 'Keep reading new records as they come (Ctrl-C stops).'
complete -c kctl -n '__kctl_at topic read' -l connector -s c -x -d 'Decode with this connector\'s converters.'
complete -c kctl -n '__kctl_at topic read' -l key-converter -x -d 'Decode keys with this converter.'
complete -c kctl -n '__kctl_at topic read' -l value-converter -x -d 'Decode values with this converter.'
complete -c kctl -n '__kctl_at topic read' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at topic read' -l help -d 'Show this message and exit.'

# kctl context
complete -c kctl -n '__kctl_at context' -a set -d 'Add or change a context (the first one becomes current). The file is private'
complete -c kctl -n '__kctl_at context' -a use -d 'Make a context the current one.'
complete -c kctl -n '__kctl_at context' -a list -d 'Contexts, the current one marked.'
complete -c kctl -n '__kctl_at context' -a current -d 'The current context and the URL commands use (after --url and KCTL_URL).'
complete -c kctl -n '__kctl_at context' -a delete -d 'Forget a context.'
complete -c kctl -n '__kctl_at context' -l help -d 'Show this message and exit.'

# kctl context set
complete -c kctl -n '__kctl_at context set' -l url -x -d 'The worker\'s REST URL.'
complete -c kctl -n '__kctl_at context set' -l use -d 'Make it the current context.'
complete -c kctl -n '__kctl_at context set' -l cacert -x -d 'CA certificate(s) (PEM) to verify an https worker with.'
complete -c kctl -n '__kctl_at context set' -l user -x -d 'User for the worker\'s Basic auth; the password comes from --password-stdin, KCTL_PASSWO...'
complete -c kctl -n '__kctl_at context set' -l password-stdin -d 'Read the password from stdin.'
complete -c kctl -n '__kctl_at context set' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at context set' -l help -d 'Show this message and exit.'

# kctl context use
complete -c kctl -n '__kctl_at context use' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at context use' -l help -d 'Show this message and exit.'

# kctl context list
complete -c kctl -n '__kctl_at context list' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at context list' -l help -d 'Show this message and exit.'

# kctl context current
complete -c kctl -n '__kctl_at context current' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at context current' -l help -d 'Show this message and exit.'

# kctl context delete
complete -c kctl -n '__kctl_at context delete' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at context delete' -l help -d 'Show this message and exit.'

# kctl logger
complete -c kctl -n '__kctl_at logger' -a list -d 'Root and every logger with a level of its own.'
complete -c kctl -n '__kctl_at logger' -a get -d 'A logger\'s effective level.'
complete -c kctl -n '__kctl_at logger' -a set -d 'Set a logger\'s level (and its descendants\' that have their own) on the worker.'
complete -c kctl -n '__kctl_at logger' -l help -d 'Show this message and exit.'

# kctl logger list
complete -c kctl -n '__kctl_at logger list' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at logger list' -l help -d 'Show this message and exit.'

# kctl logger get
complete -c kctl -n '__kctl_at logger get' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at logger get' -l help -d 'Show this message and exit.'

# kctl logger set
complete -c kctl -n '__kctl_at logger set' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at logger set' -l help -d 'Show this message and exit.'

# kctl rebalance
complete -c kctl -n '__kctl_at rebalance' -a explain -d 'Simulate a scenario (or, with --generation, a live cluster\'s round) and explain each'
complete -c kctl -n '__kctl_at rebalance' -a history -d 'The live cluster\'s recent rebalances, merged from every worker\'s records: why each'
complete -c kctl -n '__kctl_at rebalance' -l help -d 'Show this message and exit.'

# kctl rebalance explain
complete -c kctl -n '__kctl_at rebalance explain' -l scenario -s s -r -F -d 'Scenario YAML (see docs/rebalance.md).'
complete -c kctl -n '__kctl_at rebalance explain' -l kind -x -a 'connect consumer' -d 'Group kind for the flags below.'
complete -c kctl -n '__kctl_at rebalance explain' -l protocol -x -d 'connect: eager|compatible|sessioned; consumer: range|roundrobin|sticky|cooperative-sticky.'
complete -c kctl -n '__kctl_at rebalance explain' -l workers -x -d 'Initial members: a count (w1..wN, C0..CN-1) or comma-separated names.'
complete -c kctl -n '__kctl_at rebalance explain' -l connectors -x -d 'connect: number of connectors ct1..ctN.'
complete -c kctl -n '__kctl_at rebalance explain' -l tasks -x -d 'connect: tasks per connector.'
complete -c kctl -n '__kctl_at rebalance explain' -l topics -x -d 'consumer: number of topics T0..TN-1.'
complete -c kctl -n '__kctl_at rebalance explain' -l partitions -x -d 'consumer: partitions per topic.'
complete -c kctl -n '__kctl_at rebalance explain' -l join -x -d 'A member that joins (repeatable).'
complete -c kctl -n '__kctl_at rebalance explain' -l leave -x -d 'A member that leaves cleanly (repeatable).'
complete -c kctl -n '__kctl_at rebalance explain' -l crash -x -d 'A member that dies without LeaveGroup (repeatable).'
complete -c kctl -n '__kctl_at rebalance explain' -l advance -x -d 'Simulated ms to let pass after the events.'
complete -c kctl -n '__kctl_at rebalance explain' -l delay -x -d 'connect: scheduled.rebalance.max.delay.ms.'
complete -c kctl -n '__kctl_at rebalance explain' -l session-timeout -x -d 'session.timeout.ms.'
complete -c kctl -n '__kctl_at rebalance explain' -l compare -d 'Run eager and cooperative side by side.'
complete -c kctl -n '__kctl_at rebalance explain' -l trace -d 'Show the message sequence of each round.'
complete -c kctl -n '__kctl_at rebalance explain' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml.'
complete -c kctl -n '__kctl_at rebalance explain' -l width -x -d 'Render at this width (default: the terminal\'s).'
complete -c kctl -n '__kctl_at rebalance explain' -l generation -s g -x -d 'Explain this generation of the live cluster (from its records).'
complete -c kctl -n '__kctl_at rebalance explain' -l replay -d 'With --generation: run the recorded inputs through the same assignor; exit 1 where it d...'
complete -c kctl -n '__kctl_at rebalance explain' -l html -r -F -d 'Also write the timeline to this HTML file.'
complete -c kctl -n '__kctl_at rebalance explain' -l help -d 'Show this message and exit.'

# kctl rebalance history
complete -c kctl -n '__kctl_at rebalance history' -l last -s n -x -d 'Only the last N rounds.'
complete -c kctl -n '__kctl_at rebalance history' -l connector -s c -x -d 'Only rounds that moved it.'
complete -c kctl -n '__kctl_at rebalance history' -l since -x -d 'Only rounds since: 90s, 15m, 2h, 1d, or an ISO-8601 time.'
complete -c kctl -n '__kctl_at rebalance history' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml.'
complete -c kctl -n '__kctl_at rebalance history' -l html -r -F -d 'Also write the timeline to this HTML file.'
complete -c kctl -n '__kctl_at rebalance history' -l width -x -d 'Render at this width (default: the terminal\'s).'
complete -c kctl -n '__kctl_at rebalance history' -l help -d 'Show this message and exit.'

# kctl group
complete -c kctl -n '__kctl_at group' -a describe -d 'Members, generation, leader and protocol of the worker group (each member\'s URL,'
complete -c kctl -n '__kctl_at group' -l help -d 'Show this message and exit.'

# kctl group describe
complete -c kctl -n '__kctl_at group describe' -l output -s o -x -d 'table, json or yaml'
complete -c kctl -n '__kctl_at group describe' -l help -d 'Show this message and exit.'

# kctl schema
complete -c kctl -n '__kctl_at schema' -a list -d 'Subjects, with their latest version and schema id.'
complete -c kctl -n '__kctl_at schema' -a versions -d 'A subject\'s versions.'
complete -c kctl -n '__kctl_at schema' -a show -d 'One version of a subject: its id, type and schema.'
complete -c kctl -n '__kctl_at schema' -a compat -d 'Whether a schema may be registered under a subject (exit 1 when it may not).'
complete -c kctl -n '__kctl_at schema' -a config -d 'Show or set the compatibility level, globally or of one subject.'
complete -c kctl -n '__kctl_at schema' -l help -d 'Show this message and exit.'

# kctl schema list
complete -c kctl -n '__kctl_at schema list' -l deleted -d 'Include soft-deleted subjects.'
complete -c kctl -n '__kctl_at schema list' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at schema list' -l help -d 'Show this message and exit.'

# kctl schema versions
complete -c kctl -n '__kctl_at schema versions' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at schema versions' -l help -d 'Show this message and exit.'

# kctl schema show
complete -c kctl -n '__kctl_at schema show' -l version -s v -x -d 'A version number, or latest.'
complete -c kctl -n '__kctl_at schema show' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at schema show' -l help -d 'Show this message and exit.'

# kctl schema compat
complete -c kctl -n '__kctl_at schema compat' -l type -x -d 'AVRO, JSON or PROTOBUF.'
complete -c kctl -n '__kctl_at schema compat' -l version -s v -x -d 'Check against this version only [default: those the level names].'
complete -c kctl -n '__kctl_at schema compat' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at schema compat' -l help -d 'Show this message and exit.'
complete -c kctl -n '__kctl_arg 1 schema compat' -F

# kctl schema config
complete -c kctl -n '__kctl_at schema config' -l level -x -d 'Set the compatibility level: NONE, BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRAN...'
complete -c kctl -n '__kctl_at schema config' -l output -s o -x -a 'table json yaml' -d 'table, json or yaml'
complete -c kctl -n '__kctl_at schema config' -l help -d 'Show this message and exit.'
