"""One module per `rlvr` subcommand."""
