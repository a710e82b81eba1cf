"""The pykka actors of the router: the Transaction actor and the Sink actor, and their messages."""

import logging

# An actor's failure reaches the router through the actor's on_failure hook and is
# reported there (with where it happened); pykka also logs it with its traceback, which a
# program that configures logging still sees, but which is not printed on its own.
logging.getLogger("pykka").addHandler(logging.NullHandler())
