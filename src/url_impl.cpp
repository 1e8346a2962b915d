// Compiles Boost.URL once for the whole project: Debian ships its headers
// but no libboost_url.
#include <boost/url/src.hpp>
