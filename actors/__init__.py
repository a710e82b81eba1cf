"""The pykka actors of the router: listener, column info, transaction and sink."""
