// Preloaded (`node --require`) into the Pepr module when it runs on this machine
// (dev/local-operator.ts): Pepr's controller listens on its port on every interface, as a pod's
// server should; outside a pod the webhooks point at https://127.0.0.1:<port>, so a server given
// a port and no address binds loopback instead and opens nothing to the machine's network
// (docs/decisions/0012). Nothing deployed loads this file.
const net = require("node:net");

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  const portOnly = typeof args[0] === "number" && (args.length === 1 || typeof args[1] === "function");
  if (portOnly) args.splice(1, 0, process.env.JR2_LISTEN_HOST || "127.0.0.1");
  return listen.apply(this, args);
};
