#compdef kctl

_kctl_completion() {
  eval $(env _TYPER_COMPLETE_ARGS="${words[1,$CURRENT]}" _KCTL_COMPLETE=complete_zsh kctl)
}

compdef _kctl_completion kctl
