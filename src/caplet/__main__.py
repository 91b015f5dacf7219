"""``python -m caplet`` runs the command line."""

from caplet._cli._app import main

main()
