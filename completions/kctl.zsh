#compdef kctl
# kctl shell completion, generated from the CLI by `python -m kctl.cli.completions`.
# Do not edit: regenerate after changing commands or options
# (tests/cli/test_completions.py fails while this file is stale).
# Install: copy it as _kctl into a directory on $fpath before `compinit` runs,
# or source it after `compinit`.

# kctl
_kctl() {
    local curcontext=$curcontext state state_descr line ret=1
    typeset -A opt_args
    _arguments -C \
        '--url=[Worker REST URL \[default\: the current context'\''s, else http\://127.0.0.1\:8083\]]:url: ' \
        '--context=[Use this context'\''s URL.]:context: ' \
        '--cacert=[CA certificate(s) (PEM) that signed an https worker'\''s certificate \[default\: the context...]:cacert: ' \
        '--insecure[Do not verify an https worker'\''s certificate.]' \
        '(--output -o)--output=[table, json or yaml for every command]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml for every command]:output:(table json yaml)' \
        '--debug[Show tracebacks on errors.]' \
        '--timeout=[Seconds to keep retrying a request a cluster refuses while it rebalances (409); 0 answe...]:timeout: ' \
        '--install-completion[Install completion for the current shell.]' \
        '--show-completion[Show completion for the current shell, to copy it or customize the installation.]' \
        '--help[Show this message and exit.]' \
        '1:command:->command' \
        '*::argument:->argument' && ret=0
    case $state in
        command)
            local -a commands=(
                'worker:Run a worker.'
                'connector:Manage connectors on a worker.'
                'plugins:Connector plugins the worker knows.'
                'dlq:A connector'\''s dead letter queue.'
                'topic:Look inside topics: list, describe, read records.'
                'context:Named worker URLs (kcctl'\''s contexts).'
                'logger:A worker'\''s log levels at run time (KIP-495).'
                'rebalance:Simulate Kafka Connect and consumer group rebalances and explain every round.'
                'group:Describe the worker group and sink connectors'\'' consumer groups.'
                'schema:Schemas in the worker'\''s Schema Registry (Confluent'\''s API).'
            )
            _describe -t commands 'kctl command' commands && ret=0 ;;
        argument)
            curcontext=${curcontext%:*:*}:kctl-$line[1]:
            case $line[1] in
                worker) _kctl_worker && ret=0 ;;
                connector) _kctl_connector && ret=0 ;;
                plugins) _kctl_plugins && ret=0 ;;
                dlq) _kctl_dlq && ret=0 ;;
                topic) _kctl_topic && ret=0 ;;
                context) _kctl_context && ret=0 ;;
                logger) _kctl_logger && ret=0 ;;
                rebalance) _kctl_rebalance && ret=0 ;;
                group) _kctl_group && ret=0 ;;
                schema) _kctl_schema && ret=0 ;;
            esac ;;
    esac
    return ret
}

# kctl worker
_kctl_worker() {
    local curcontext=$curcontext state state_descr line ret=1
    typeset -A opt_args
    _arguments -C \
        '--help[Show this message and exit.]' \
        '1:command:->command' \
        '*::argument:->argument' && ret=0
    case $state in
        command)
            local -a commands=(
                'start:Start a worker in the foreground: standalone (embedded defaults without CONFIG), or a'
                'prepare:Record Spark'\''s class data so this machine'\''s workers start their JVM in about half the'
            )
            _describe -t commands 'kctl worker command' commands && ret=0 ;;
        argument)
            curcontext=${curcontext%:*:*}:kctl-worker-$line[1]:
            case $line[1] in
                start) _kctl_worker_start && ret=0 ;;
                prepare) _kctl_worker_prepare && ret=0 ;;
            esac ;;
    esac
    return ret
}

# kctl worker start
_kctl_worker_start() {
    _arguments \
        '--help[Show this message and exit.]' \
        '1:config:_files' \
        '*:connectors:_files'
}

# kctl worker prepare
_kctl_worker_prepare() {
    _arguments \
        '--help[Show this message and exit.]' \
        '1:config:_files'
}

# kctl connector
_kctl_connector() {
    local curcontext=$curcontext state state_descr line ret=1
    typeset -A opt_args
    _arguments -C \
        '--help[Show this message and exit.]' \
        '1:command:->command' \
        '*::argument:->argument' && ret=0
    case $state in
        command)
            local -a commands=(
                'list:List connectors with their states.'
                'get:Show a connector'\''s config and tasks.'
                'config:Show a connector'\''s config.'
                'status:Connector and task states, worker ids and failure traces.'
                'create:Create a connector.'
                'apply:Create or update a connector, showing the changed keys.'
                'patch:Change some keys of a connector'\''s config, showing the changed keys.'
                'pause:Pause a connector and its tasks.'
                'resume:Resume a paused connector.'
                'stop:Stop a connector: its tasks end, its config stays.'
                'delete:Delete a connector.'
                'restart:Restart a connector (and its tasks), or one task.'
                'validate:Validate a connector config; per-field errors as a table.'
                'offsets:Read and change a connector'\''s offsets.'
            )
            _describe -t commands 'kctl connector command' commands && ret=0 ;;
        argument)
            curcontext=${curcontext%:*:*}:kctl-connector-$line[1]:
            case $line[1] in
                list) _kctl_connector_list && ret=0 ;;
                get) _kctl_connector_get && ret=0 ;;
                config) _kctl_connector_config && ret=0 ;;
                status) _kctl_connector_status && ret=0 ;;
                create) _kctl_connector_create && ret=0 ;;
                apply) _kctl_connector_apply && ret=0 ;;
                patch) _kctl_connector_patch && ret=0 ;;
                pause) _kctl_connector_pause && ret=0 ;;
                resume) _kctl_connector_resume && ret=0 ;;
                stop) _kctl_connector_stop && ret=0 ;;
                delete) _kctl_connector_delete && ret=0 ;;
                restart) _kctl_connector_restart && ret=0 ;;
                validate) _kctl_connector_validate && ret=0 ;;
                offsets) _kctl_connector_offsets && ret=0 ;;
            esac ;;
    esac
    return ret
}

# kctl connector list
_kctl_connector_list() {
    _arguments \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]'
}

# kctl connector get
_kctl_connector_get() {
    _arguments \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]' \
        '1:name: '
}

# kctl connector config
_kctl_connector_config() {
    _arguments \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]' \
        '1:name: '
}

# kctl connector status
_kctl_connector_status() {
    _arguments \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--metrics[Also record counts and rates per task (two scrapes of /metrics, --interval apart).]' \
        '--interval=[Seconds between the scrapes.]:interval: ' \
        '--help[Show this message and exit.]' \
        '1:name: '
}

# kctl connector create
_kctl_connector_create() {
    _arguments \
        '--wait[Show progress until RUNNING or FAILED.]' \
        '--initial-state=[RUNNING, PAUSED or STOPPED]:initial_state: ' \
        '--timeout=[Seconds --wait waits.]:timeout: ' \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]' \
        '1:file:_files'
}

# kctl connector apply
_kctl_connector_apply() {
    _arguments \
        '--dry-run[Show the changes and validate; write nothing.]' \
        '--wait[Show progress until RUNNING or FAILED.]' \
        '--timeout=[Seconds --wait waits.]:timeout: ' \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]' \
        '1:file:_files'
}

# kctl connector patch
_kctl_connector_patch() {
    _arguments \
        '--dry-run[Show the changes and validate; write nothing.]' \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]' \
        '1:name: ' \
        '*:settings: '
}

# kctl connector pause
_kctl_connector_pause() {
    _arguments \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]' \
        '1:name: '
}

# kctl connector resume
_kctl_connector_resume() {
    _arguments \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]' \
        '1:name: '
}

# kctl connector stop
_kctl_connector_stop() {
    _arguments \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]' \
        '1:name: '
}

# kctl connector delete
_kctl_connector_delete() {
    _arguments \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]' \
        '1:name: '
}

# kctl connector restart
_kctl_connector_restart() {
    _arguments \
        '--include-tasks[Restart its tasks too.]' \
        '--only-failed[Only what is FAILED (with --include-tasks\: only failed tasks).]' \
        '--task=[Restart only this task.]:task: ' \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]' \
        '1:name: '
}

# kctl connector validate
_kctl_connector_validate() {
    _arguments \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]' \
        '1:file:_files'
}

# kctl connector offsets
_kctl_connector_offsets() {
    local curcontext=$curcontext state state_descr line ret=1
    typeset -A opt_args
    _arguments -C \
        '--help[Show this message and exit.]' \
        '1:command:->command' \
        '*::argument:->argument' && ret=0
    case $state in
        command)
            local -a commands=(
                'get:Committed offsets of a connector.'
                'set:Alter offsets of a STOPPED connector.'
                'reset:Forget all offsets of a STOPPED connector.'
            )
            _describe -t commands 'kctl connector offsets command' commands && ret=0 ;;
        argument)
            curcontext=${curcontext%:*:*}:kctl-connector-offsets-$line[1]:
            case $line[1] in
                get) _kctl_connector_offsets_get && ret=0 ;;
                set) _kctl_connector_offsets_set && ret=0 ;;
                reset) _kctl_connector_offsets_reset && ret=0 ;;
            esac ;;
    esac
    return ret
}

# kctl connector offsets get
_kctl_connector_offsets_get() {
    _arguments \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]' \
        '1:name: '
}

# kctl connector offsets set
_kctl_connector_offsets_set() {
    _arguments \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]' \
        '1:name: ' \
        '2:file:_files'
}

# kctl connector offsets reset
_kctl_connector_offsets_reset() {
    _arguments \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]' \
        '1:name: '
}

# kctl plugins
_kctl_plugins() {
    local curcontext=$curcontext state state_descr line ret=1
    typeset -A opt_args
    _arguments -C \
        '--help[Show this message and exit.]' \
        '1:command:->command' \
        '*::argument:->argument' && ret=0
    case $state in
        command)
            local -a commands=(
                'list:Connector plugins the worker can run.'
                'new:Write a pip-installable connector project: pyproject with the kctl.connectors entry'
            )
            _describe -t commands 'kctl plugins command' commands && ret=0 ;;
        argument)
            curcontext=${curcontext%:*:*}:kctl-plugins-$line[1]:
            case $line[1] in
                list) _kctl_plugins_list && ret=0 ;;
                new) _kctl_plugins_new && ret=0 ;;
            esac ;;
    esac
    return ret
}

# kctl plugins list
_kctl_plugins_list() {
    _arguments \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--local[The plugins this Python finds (entry points, --plugin-path), without a worker; plugins...]' \
        '*--plugin-path=[A plugin.path directory (with --local).]:plugin_path: ' \
        '--help[Show this message and exit.]'
}

# kctl plugins new
_kctl_plugins_new() {
    _arguments \
        '--source[A source connector (the default).]' \
        '--sink[A sink connector.]' \
        '--dir=[Where the project'\''s directory goes.]:directory:_files' \
        '--help[Show this message and exit.]' \
        '1:name: '
}

# kctl dlq
_kctl_dlq() {
    local curcontext=$curcontext state state_descr line ret=1
    typeset -A opt_args
    _arguments -C \
        '--help[Show this message and exit.]' \
        '1:command:->command' \
        '*::argument:->argument' && ret=0
    case $state in
        command)
            local -a commands=(
                'show:Records a connector rejected: when, stage, exception, origin, payload preview.'
                'replay:Re-send a connector'\''s rejected records (e.g. after fixing a transform); exits 1 when'
                'purge:Clear a connector'\''s DLQ (e.g. after a replay): later shows and replays start after'
            )
            _describe -t commands 'kctl dlq command' commands && ret=0 ;;
        argument)
            curcontext=${curcontext%:*:*}:kctl-dlq-$line[1]:
            case $line[1] in
                show) _kctl_dlq_show && ret=0 ;;
                replay) _kctl_dlq_replay && ret=0 ;;
                purge) _kctl_dlq_purge && ret=0 ;;
            esac ;;
    esac
    return ret
}

# kctl dlq show
_kctl_dlq_show() {
    _arguments \
        '--limit=[Most records shown.]:limit: ' \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]' \
        '1:name: '
}

# kctl dlq replay
_kctl_dlq_replay() {
    _arguments \
        '--to=[Send to this topic instead of the original.]:to: ' \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]' \
        '1:name: '
}

# kctl dlq purge
_kctl_dlq_purge() {
    _arguments \
        '(--yes -y)--yes[Do not ask for confirmation.]' \
        '(--yes -y)-y[Do not ask for confirmation.]' \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]' \
        '1:name: '
}

# kctl topic
_kctl_topic() {
    local curcontext=$curcontext state state_descr line ret=1
    typeset -A opt_args
    _arguments -C \
        '--help[Show this message and exit.]' \
        '1:command:->command' \
        '*::argument:->argument' && ret=0
    case $state in
        command)
            local -a commands=(
                'list:Every topic of the worker'\''s log, with its partition count.'
                'describe:Partitions with start and end offsets, and the value schemas seen (in the first and'
                'read:Records with partition, offset, timestamp, headers, key and value, decoded by the'
            )
            _describe -t commands 'kctl topic command' commands && ret=0 ;;
        argument)
            curcontext=${curcontext%:*:*}:kctl-topic-$line[1]:
            case $line[1] in
                list) _kctl_topic_list && ret=0 ;;
                describe) _kctl_topic_describe && ret=0 ;;
                read) _kctl_topic_read && ret=0 ;;
            esac ;;
    esac
    return ret
}

# kctl topic list
_kctl_topic_list() {
    _arguments \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]'
}

# kctl topic describe
_kctl_topic_describe() {
    _arguments \
        '(--connector -c)--connector=[Decode with this connector'\''s converters.]:connector: ' \
        '(--connector -c)-c+[Decode with this connector'\''s converters.]:connector: ' \
        '--value-converter=[Decode values with this converter.]:value_converter: ' \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]' \
        '1:topic: '
}

# kctl topic read
_kctl_topic_read() {
    _arguments \
        '--from-beginning[Read each partition from its start (the default).]' \
        '--offset=[Read each partition from this offset.]:offset: ' \
        '--last=[Read the last N records of each partition.]:last: ' \
        '(--partition -p)--partition=[Only this partition.]:partition: ' \
        '(--partition -p)-p+[Only this partition.]:partition: ' \
        '(--max -n)--max=[Stop after this many records.]:max_records: ' \
        '(--max -n)-n+[Stop after this many records.]:max_records: ' \
        '(--follow -f)--follow[Keep reading new records as they come (Ctrl-C stops).]' \
        '(--follow -f)-f[Keep reading new records as they come (Ctrl-C stops).]' \
        '(--connector -c)--connector=[Decode with this connector'\''s converters.]:connector: ' \
        '(--connector -c)-c+[Decode with this connector'\''s converters.]:connector: ' \
        '--key-converter=[Decode keys with this converter.]:key_converter: ' \
        '--value-converter=[Decode values with this converter.]:value_converter: ' \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]' \
        '1:topic: '
}

# kctl context
_kctl_context() {
    local curcontext=$curcontext state state_descr line ret=1
    typeset -A opt_args
    _arguments -C \
        '--help[Show this message and exit.]' \
        '1:command:->command' \
        '*::argument:->argument' && ret=0
    case $state in
        command)
            local -a commands=(
                'set:Add or change a context (the first one becomes current). The file is private'
                'use:Make a context the current one.'
                'list:Contexts, the current one marked.'
                'current:The current context and the URL commands use (after --url and KCTL_URL).'
                'delete:Forget a context.'
            )
            _describe -t commands 'kctl context command' commands && ret=0 ;;
        argument)
            curcontext=${curcontext%:*:*}:kctl-context-$line[1]:
            case $line[1] in
                set) _kctl_context_set && ret=0 ;;
                use) _kctl_context_use && ret=0 ;;
                list) _kctl_context_list && ret=0 ;;
                current) _kctl_context_current && ret=0 ;;
                delete) _kctl_context_delete && ret=0 ;;
            esac ;;
    esac
    return ret
}

# kctl context set
_kctl_context_set() {
    _arguments \
        '--url=[The worker'\''s REST URL.]:url: ' \
        '--use[Make it the current context.]' \
        '--cacert=[CA certificate(s) (PEM) to verify an https worker with.]:cacert: ' \
        '--user=[User for the worker'\''s Basic auth; the password comes from --password-stdin, KCTL_PASSWO...]:user: ' \
        '--password-stdin[Read the password from stdin.]' \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]' \
        '1:name: '
}

# kctl context use
_kctl_context_use() {
    _arguments \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]' \
        '1:name: '
}

# kctl context list
_kctl_context_list() {
    _arguments \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]'
}

# kctl context current
_kctl_context_current() {
    _arguments \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]'
}

# kctl context delete
_kctl_context_delete() {
    _arguments \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]' \
        '1:name: '
}

# kctl logger
_kctl_logger() {
    local curcontext=$curcontext state state_descr line ret=1
    typeset -A opt_args
    _arguments -C \
        '--help[Show this message and exit.]' \
        '1:command:->command' \
        '*::argument:->argument' && ret=0
    case $state in
        command)
            local -a commands=(
                'list:Root and every logger with a level of its own.'
                'get:A logger'\''s effective level.'
                'set:Set a logger'\''s level (and its descendants'\'' that have their own) on the worker.'
            )
            _describe -t commands 'kctl logger command' commands && ret=0 ;;
        argument)
            curcontext=${curcontext%:*:*}:kctl-logger-$line[1]:
            case $line[1] in
                list) _kctl_logger_list && ret=0 ;;
                get) _kctl_logger_get && ret=0 ;;
                set) _kctl_logger_set && ret=0 ;;
            esac ;;
    esac
    return ret
}

# kctl logger list
_kctl_logger_list() {
    _arguments \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]'
}

# kctl logger get
_kctl_logger_get() {
    _arguments \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]' \
        '1:name: '
}

# kctl logger set
_kctl_logger_set() {
    _arguments \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]' \
        '1:name: ' \
        '2:level: '
}

# kctl rebalance
_kctl_rebalance() {
    local curcontext=$curcontext state state_descr line ret=1
    typeset -A opt_args
    _arguments -C \
        '--help[Show this message and exit.]' \
        '1:command:->command' \
        '*::argument:->argument' && ret=0
    case $state in
        command)
            local -a commands=(
                'explain:Simulate a scenario (or, with --generation, a live cluster'\''s round) and explain each'
                'history:The live cluster'\''s recent rebalances, merged from every worker'\''s records: why each'
            )
            _describe -t commands 'kctl rebalance command' commands && ret=0 ;;
        argument)
            curcontext=${curcontext%:*:*}:kctl-rebalance-$line[1]:
            case $line[1] in
                explain) _kctl_rebalance_explain && ret=0 ;;
                history) _kctl_rebalance_history && ret=0 ;;
            esac ;;
    esac
    return ret
}

# kctl rebalance explain
_kctl_rebalance_explain() {
    _arguments \
        '(--scenario -s)--scenario=[Scenario YAML (see docs/rebalance.md).]:scenario:_files' \
        '(--scenario -s)-s+[Scenario YAML (see docs/rebalance.md).]:scenario:_files' \
        '--kind=[Group kind for the flags below.]:kind:(connect consumer)' \
        '--protocol=[connect\: eager|compatible|sessioned; consumer\: range|roundrobin|sticky|cooperative-sticky.]:protocol: ' \
        '--workers=[Initial members\: a count (w1..wN, C0..CN-1) or comma-separated names.]:workers: ' \
        '--connectors=[connect\: number of connectors ct1..ctN.]:connectors: ' \
        '--tasks=[connect\: tasks per connector.]:tasks: ' \
        '--topics=[consumer\: number of topics T0..TN-1.]:topics: ' \
        '--partitions=[consumer\: partitions per topic.]:partitions: ' \
        '*--join=[A member that joins (repeatable).]:join: ' \
        '*--leave=[A member that leaves cleanly (repeatable).]:leave: ' \
        '*--crash=[A member that dies without LeaveGroup (repeatable).]:crash: ' \
        '--advance=[Simulated ms to let pass after the events.]:advance: ' \
        '--delay=[connect\: scheduled.rebalance.max.delay.ms.]:delay: ' \
        '--session-timeout=[session.timeout.ms.]:session_timeout: ' \
        '--compare[Run eager and cooperative side by side.]' \
        '--trace[Show the message sequence of each round.]' \
        '(--output -o)--output=[table, json or yaml.]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml.]:output:(table json yaml)' \
        '--width=[Render at this width (default\: the terminal'\''s).]:width: ' \
        '(--generation -g)--generation=[Explain this generation of the live cluster (from its records).]:generation: ' \
        '(--generation -g)-g+[Explain this generation of the live cluster (from its records).]:generation: ' \
        '--replay[With --generation\: run the recorded inputs through the same assignor; exit 1 where it d...]' \
        '--html=[Also write the timeline to this HTML file.]:html:_files' \
        '--help[Show this message and exit.]'
}

# kctl rebalance history
_kctl_rebalance_history() {
    _arguments \
        '(--last -n)--last=[Only the last N rounds.]:last: ' \
        '(--last -n)-n+[Only the last N rounds.]:last: ' \
        '(--connector -c)--connector=[Only rounds that moved it.]:connector: ' \
        '(--connector -c)-c+[Only rounds that moved it.]:connector: ' \
        '--since=[Only rounds since\: 90s, 15m, 2h, 1d, or an ISO-8601 time.]:since: ' \
        '(--output -o)--output=[table, json or yaml.]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml.]:output:(table json yaml)' \
        '--html=[Also write the timeline to this HTML file.]:html:_files' \
        '--width=[Render at this width (default\: the terminal'\''s).]:width: ' \
        '--help[Show this message and exit.]'
}

# kctl group
_kctl_group() {
    local curcontext=$curcontext state state_descr line ret=1
    typeset -A opt_args
    _arguments -C \
        '--help[Show this message and exit.]' \
        '1:command:->command' \
        '*::argument:->argument' && ret=0
    case $state in
        command)
            local -a commands=(
                'describe:Members, generation, leader and protocol of the worker group (each member'\''s URL,'
            )
            _describe -t commands 'kctl group command' commands && ret=0 ;;
        argument)
            curcontext=${curcontext%:*:*}:kctl-group-$line[1]:
            case $line[1] in
                describe) _kctl_group_describe && ret=0 ;;
            esac ;;
    esac
    return ret
}

# kctl group describe
_kctl_group_describe() {
    _arguments \
        '(--output -o)--output=[table, json or yaml]:output: ' \
        '(--output -o)-o+[table, json or yaml]:output: ' \
        '--help[Show this message and exit.]' \
        '1:group: '
}

# kctl schema
_kctl_schema() {
    local curcontext=$curcontext state state_descr line ret=1
    typeset -A opt_args
    _arguments -C \
        '--help[Show this message and exit.]' \
        '1:command:->command' \
        '*::argument:->argument' && ret=0
    case $state in
        command)
            local -a commands=(
                'list:Subjects, with their latest version and schema id.'
                'versions:A subject'\''s versions.'
                'show:One version of a subject: its id, type and schema.'
                'compat:Whether a schema may be registered under a subject (exit 1 when it may not).'
                'config:Show or set the compatibility level, globally or of one subject.'
            )
            _describe -t commands 'kctl schema command' commands && ret=0 ;;
        argument)
            curcontext=${curcontext%:*:*}:kctl-schema-$line[1]:
            case $line[1] in
                list) _kctl_schema_list && ret=0 ;;
                versions) _kctl_schema_versions && ret=0 ;;
                show) _kctl_schema_show && ret=0 ;;
                compat) _kctl_schema_compat && ret=0 ;;
                config) _kctl_schema_config && ret=0 ;;
            esac ;;
    esac
    return ret
}

# kctl schema list
_kctl_schema_list() {
    _arguments \
        '--deleted[Include soft-deleted subjects.]' \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]'
}

# kctl schema versions
_kctl_schema_versions() {
    _arguments \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]' \
        '1:subject: '
}

# kctl schema show
_kctl_schema_show() {
    _arguments \
        '(--version -v)--version=[A version number, or latest.]:version: ' \
        '(--version -v)-v+[A version number, or latest.]:version: ' \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]' \
        '1:subject: '
}

# kctl schema compat
_kctl_schema_compat() {
    _arguments \
        '--type=[AVRO, JSON or PROTOBUF.]:schema_type: ' \
        '(--version -v)--version=[Check against this version only \[default\: those the level names\].]:version: ' \
        '(--version -v)-v+[Check against this version only \[default\: those the level names\].]:version: ' \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]' \
        '1:subject: ' \
        '2:file:_files'
}

# kctl schema config
_kctl_schema_config() {
    _arguments \
        '--level=[Set the compatibility level\: NONE, BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRAN...]:level: ' \
        '(--output -o)--output=[table, json or yaml]:output:(table json yaml)' \
        '(--output -o)-o+[table, json or yaml]:output:(table json yaml)' \
        '--help[Show this message and exit.]' \
        '1:subject: '
}

# Autoloaded from $fpath, this file is the body of _kctl; sourced, it registers _kctl.
if [[ $funcstack[1] == _kctl ]]; then
    _kctl "$@"
else
    compdef _kctl kctl
fi
