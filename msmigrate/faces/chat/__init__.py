"""``msmigrate chat``: an interactive session over the migration graph (see ``session.ChatSession``)."""
