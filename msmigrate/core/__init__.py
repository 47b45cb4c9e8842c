"""The shared base under every other room: the result type tool cores return (and the wrapper that turns a core
into a model-callable tool), and the run context a tool works in. It imports nothing of msmigrate."""
