// Preloaded into node servers under test (node --require): every listen on
// a port binds 127.0.0.1 only, never all interfaces.
const net = require('net');
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === 'number' || (typeof args[0] === 'string' && /^[0-9]+$/.test(args[0]))) {
    const cb = args.find((a) => typeof a === 'function');
    return cb ? listen.call(this, Number(args[0]), '127.0.0.1', cb) : listen.call(this, Number(args[0]), '127.0.0.1');
  }
  if (args[0] && typeof args[0] === 'object' && args[0].path === undefined) {
    args[0] = Object.assign({}, args[0], { host: '127.0.0.1' });
  }
  return listen.apply(this, args);
};
