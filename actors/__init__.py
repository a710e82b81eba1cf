"""The pykka actors of the router: the Transaction actor and the Sink actor, and their messages."""
