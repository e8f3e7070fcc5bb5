"""The wire between sparkdl's processes: authenticated channels and the messages they carry.

- ``channel.py``: length-prefixed, HMAC-authenticated frames over TCP (``ChannelServer``,
  ``connect``), bound to an ``Endpoint`` (``endpoint.py``), with bounded admission of
  unauthenticated peers (``admission.py``), rate-limited logging of rejections
  (``rejection_log.py``) and the sockets' TCP options (``tcp_options.py``).
- ``protocol.py``: every message, one class each, and the checking parser (nothing is pickled).
- ``clients.py``: the requests the driver sends to a node's services, each written once.
"""
